"""One way from parsed options to a Bench, shared by `kforge bench` and `%kforge bench`."""
from __future__ import annotations

from pathlib import Path

from ..executors import make_executor
from ..options import BENCH, defaults
from ..session.config import agents_from_args, budget_from_args, eval_options, search_from_args
from ..targets import get_target
from .runner import Bench
from .store import Store, folder_name
from .suite import entries

# options that say where or how to show a bench, not what it measures
NOT_SETTINGS = {"command", "func", "problems", "out", "workers", "cluster", "restart", "json"}


def bench_from_args(args) -> Bench:
    """The Bench these options ask for; raises FileNotFoundError / ValueError (bad problems
    or candidates folder), SettingsDiffer, ExecutorError (a cluster out of reach)."""
    suite = entries(args.problems)
    if not suite:
        raise FileNotFoundError(f"no problem files in {' '.join(map(str, args.problems))}")
    if args.candidates and not Path(args.candidates).is_dir():
        raise FileNotFoundError(f"--candidates {args.candidates!r} is not a folder")
    target = get_target(args.target).name
    settings = {k: v for k, v in sorted(vars(args).items()) if k not in NOT_SETTINGS}
    settings["problems"] = [str(Path(p).resolve()) for p in args.problems]
    settings["candidates"] = str(Path(args.candidates).resolve()) if args.candidates else None
    mode = "candidates" if args.candidates else args.provider
    store = Store(Path(args.out) / folder_name(args.problems, target, mode), settings,
                  restart=args.restart, defaults=vars(defaults(BENCH)))
    executor = make_executor(args.workers, args.cluster, log_dir=store.folder / "workers")
    return Bench(suite, target, store, executor, agents=agents_from_args(args),
                 budget=budget_from_args(args), options=eval_options(args),
                 candidates=args.candidates, search=search_from_args(args))
