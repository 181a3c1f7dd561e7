"""One way from parsed options to a Session, shared by `kforge run` and the `%%kforge` magic.

`run_defaults()` is `kforge run`'s defaults, from the one schema of options (kforge_nb/options.py);
`session_from_args(problem, args)` builds the Session from any namespace carrying the same
attribute names (`target`, `provider`, `iterations`, `no_compile_baseline`, ...).
"""
from __future__ import annotations

import argparse

from ..options import RUN, defaults
from ..problem import Problem
from ..targets import get_target
from . import feasible
from .core import Budget, Session


def run_defaults() -> argparse.Namespace:
    """Every `kforge run` option at its default value."""
    return defaults(RUN)


def session_from_args(problem: Problem, args, policy=None) -> Session:
    """The Session `kforge run` would build for these options (plus `mode` where given); a
    target that cannot run here is refused (feasible.TargetError) before its folder exists."""
    agents = agents_from_args(args)
    feasible.check(agents, get_target(args.target))
    return Session(
        problem, args.target, agents=agents, budget=budget_from_args(args),
        options=eval_options(args), mode=getattr(args, "mode", None) or "auto", aux=args.aux,
        translate_from=args.translate_from, out=args.out, policy=policy,
        search=search_from_args(args))


def model_session_from_args(problem: Problem, args):
    """The ModelSession `kforge model` (and `%%kforge --whole-model`) builds for these options."""
    from ..model import ModelSession
    agents = agents_from_args(args)
    feasible.check(agents, get_target(args.target))
    return ModelSession(problem, args.target, agents=agents,
                        budget=budget_from_args(args), options=eval_options(args),
                        parts=args.parts, top=args.top, use=args.use, out=args.out,
                        search=search_from_args(args))


def agents_from_args(args):
    """AgentConfig from the agent flags (`kforge bench` has no recording flags: None there)."""
    from ..agents import AgentConfig
    from ..knowledge import check_folders       # a missing --knowledge folder: a usage error
    return AgentConfig(provider=args.provider, model=args.model,
                       analysis_provider=args.analysis_provider,
                       analysis_model=args.analysis_model, record=getattr(args, "record", None),
                       replay=getattr(args, "replay", None), prompts_dir=args.prompts,
                       hint=args.hint, images=not args.no_images, ncu=not args.no_ncu,
                       temperatures=getattr(args, "temperatures", None),
                       knowledge_dirs=check_folders(getattr(args, "knowledge", None)))


def search_from_args(args):
    """The search strategy (--search, --beam); a --beam with greedy is a SearchError (a
    usage error, exit 2)."""
    from .search import make_search
    return make_search(getattr(args, "search", None) or "greedy", getattr(args, "beam", None))


def budget_from_args(args) -> Budget:
    return Budget(iterations=args.iterations, samples=args.samples, wall_s=args.wall_time,
                  tokens=args.max_tokens, cost_usd=args.max_cost,
                  target_speedup=args.target_speedup, patience=args.patience,
                  confirm=getattr(args, "confirm", None))


# `kforge run` flags that may raise a resumed run's budget -> Budget fields
RESUMABLE_BUDGET = {"iterations": "iterations", "wall_time": "wall_s", "max_tokens": "tokens",
                    "max_cost": "cost_usd", "patience": "patience"}


def resume_from_args(args, policy=None, mode: str | None = None) -> Session:
    """`kforge run --resume RUN_DIR`: the saved run, with the budget flags given on this line
    (those that differ from their defaults) applied; every other option is the run's own,
    the mode too unless `mode` is given."""
    defaults = run_defaults()
    changes = {field: getattr(args, flag) for flag, field in RESUMABLE_BUDGET.items()
               if getattr(args, flag, None) != getattr(defaults, flag, None)}
    return Session.resume(args.resume, policy=policy, mode=mode, **changes)


def eval_options(args):
    """EvalOptions from the evaluation flags every command shares (see options.JUDGING). A
    --measure hook is read (never run) here: a missing file, or one without `measure`, is a
    MeasureError (a usage error, exit 2)."""
    from ..baselines import compile_mode
    from ..evaluator import EvalOptions
    from ..guardrails import Guardrails
    from ..measures import eval_fields
    return EvalOptions(
        trials=args.trials, timeout_s=args.timeout, precision=args.precision, out_dir=args.out,
        guardrails=Guardrails(bans=args.ban, requires=args.require, allow=args.allow,
                              precision=args.precision),
        baselines=("eager",) if args.no_compile_baseline else ("eager", "compile"),
        compile_mode=compile_mode(args.baseline),
        shape_check=not args.no_shape_check,
        sandbox=not getattr(args, "no_sandbox", False),
        **eval_fields(getattr(args, "measure", None), getattr(args, "objective", None)))
