"""`kforge`: the command line, a thin shell over the library.

    kforge eval REF CAND [--target T] [--json] ...   judge one candidate (exit 0 iff correct)
    kforge run PROBLEM [--provider P] [--iterations N] ... the agent loop (exit 0 iff correct)
    kforge run --resume RUN_DIR [--iterations N] ...   go on with an interrupted or ended run
    kforge runs [DIR]                                  the runs under DIR: state, best so far
    kforge bench DIR_OR_FILES [--provider P] ...       a session per problem, one table
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import __version__

EXIT_CORRECT, EXIT_VERDICT, EXIT_USAGE = 0, 1, 2


def positive(kind):
    """An argparse type: a number above zero, said plainly when it is not (exit 2)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {kind.__name__}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
        return value
    parse.__name__ = f"positive {kind.__name__}"
    return parse


def at_least_zero(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an int") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return value


def add_eval_options(p: argparse.ArgumentParser) -> None:
    """Options shared by every command that evaluates candidates."""
    from .evaluator.correctness import POLICIES
    p.add_argument("--target", default="auto", help="cpp, triton, cuda, metal or auto "
                   "(triton with a CUDA GPU, cpp otherwise)")
    p.add_argument("--trials", type=positive(int), default=5, help="correctness trials, each with fresh "
                   "random inputs (default 5)")
    p.add_argument("--timeout", type=positive(float), default=180.0, help="seconds a candidate may take "
                   "(default 180)")
    p.add_argument("--out", default="kforge-runs", help="artifacts folder (default kforge-runs)")
    p.add_argument("--precision", choices=POLICIES, default="strict", help="precision policy: "
                   "strict fp32 by default; tf32/bf16/fp16 loosen tolerances and allow casts")
    p.add_argument("--ban", action="append", default=[], metavar="REGEX",
                   help="reject candidates whose source matches REGEX (repeatable)")
    p.add_argument("--require", action="append", default=[], metavar="REGEX",
                   help="reject candidates whose source does not match REGEX (repeatable)")
    p.add_argument("--allow", action="append", default=[], metavar="OP",
                   help="allow a torch op in ModelNew.forward, e.g. conv2d (repeatable); '*' "
                   "allows any and requires no kernel of the candidate's own (baselines, sweeps)")
    p.add_argument("--no-sandbox", action="store_true",
                   help="run candidates with your environment, network and files (the verdict "
                   "says so): for kernels that need something the sandbox denies")
    p.add_argument("--no-compile-baseline", action="store_true",
                   help="skip timing torch.compile (its first compile takes ~30 s on a small CPU)")
    p.add_argument("--no-shape-check", action="store_true",
                   help="skip the extra trial at another batch size")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kforge", description="Interactive kernel "
                                     "engineering: generate, judge and profile kernels for "
                                     "PyTorch modules.")
    parser.add_argument("--version", action="version", version=f"kforge-nb {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("eval", help="judge one candidate against a reference")
    p.add_argument("reference", help="reference .py in KernelBench form (Model, get_inputs, "
                   "get_init_inputs)")
    p.add_argument("candidate", help="candidate .py defining ModelNew")
    p.add_argument("--json", action="store_true", help="print one JSON object (the Result)")
    add_eval_options(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("run", help="generate, judge and improve kernels for a reference")
    p.add_argument("reference", nargs="?", help="reference .py in KernelBench form (none with "
                   "--resume)")
    p.add_argument("--resume", metavar="RUN_DIR", help="go on with the run saved in RUN_DIR "
                   "(interrupted, or ended): its problem and options, from its next iteration; "
                   "--iterations, --wall-time, --max-tokens, --max-cost, --patience raise its "
                   "budget")
    p.add_argument("--provider", default="auto", help="anthropic, openai, replay, builtin or "
                   "auto (anthropic with ANTHROPIC_API_KEY, builtin otherwise)")
    p.add_argument("--model", help="generation model (default: the provider's)")
    p.add_argument("--analysis-model", help="analysis model (default: --model)")
    p.add_argument("--analysis-provider", help="analysis provider (default: --provider)")
    p.add_argument("--iterations", type=positive(int), default=8, help="rounds (default 8)")
    p.add_argument("--samples", type=positive(int), default=1, help="candidates per round, evaluated "
                   "concurrently; the best is kept (default 1)")
    p.add_argument("--from", dest="translate_from", metavar="RUN_OR_FILE",
                   help="a verified kernel (file, or run folder) for another target to translate")
    p.add_argument("--review", action="store_true", help="ask on the terminal before applying "
                   "each recommendation")
    p.add_argument("--record", metavar="FILE", help="record every model call to FILE (JSONL)")
    p.add_argument("--replay", metavar="FILE", help="replay a recording instead of calling a model")
    p.add_argument("--aux", action="append", default=[], metavar="PATH",
                   help="a file to include in generation prompts: PATH for every iteration, "
                   "PATH@0,2 for iterations 0 and 2 (repeatable)")
    p.add_argument("--hint", default="", help="an instruction added to every generation prompt")
    p.add_argument("--prompts", metavar="DIR", help="folder of Jinja2 templates overriding the "
                   "built-in ones (generate.j2, generate.iter3.j2, analyse.j2, ...)")
    p.add_argument("--wall-time", type=positive(float), help="stop after this many seconds")
    p.add_argument("--max-tokens", type=positive(int), help="stop once this many tokens are used")
    p.add_argument("--max-cost", type=positive(float), help="stop once this many USD are spent")
    p.add_argument("--target-speedup", type=positive(float), help="stop once the best is this much "
                   "faster than eager")
    p.add_argument("--patience", type=at_least_zero, default=3, help="stop after this many optimisation "
                   "rounds without improvement (default 3)")
    p.add_argument("--json", action="store_true", help="print a JSON summary at the end")
    add_eval_options(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("runs", help="list the runs under a folder: running, interrupted or "
                       "finished, and the best so far")
    p.add_argument("folder", nargs="?", default="kforge-runs", help="default kforge-runs")
    p.add_argument("--json", action="store_true", help="print the runs as JSON")
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("bench", help="run a session per problem of a suite; print a table")
    p.add_argument("problems", nargs="+", help="problem files or folders of them")
    p.add_argument("--provider", default="builtin", help="provider (default builtin)")
    p.add_argument("--model", help="generation model")
    p.add_argument("--iterations", type=positive(int), default=3, help="rounds per problem (default 3)")
    p.add_argument("--samples", type=positive(int), default=1)
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    add_eval_options(p)
    p.set_defaults(func=cmd_bench)
    return parser


def cmd_eval(args) -> int:
    from .evaluator import evaluate
    from .problem import Problem
    from .session.config import eval_options
    from .targets import get_target
    candidate_path = Path(args.candidate)
    if not candidate_path.is_file():
        return usage_error(f"candidate file {args.candidate!r} does not exist")
    problem = Problem.from_file(args.reference)
    target = get_target(args.target)
    if not args.json:
        print(f"kforge eval: {candidate_path.name} vs {problem.label} on {target.name} "
              f"({target.device()})", file=sys.stderr)
    # bytes: a file that is not UTF-8 text is the candidate's compile_failure, kept as it was
    result = evaluate(problem, candidate_path.read_bytes(), target, eval_options(args))
    if args.json:
        print(json.dumps(result.to_dict(), default=str))
    else:
        print(result.summary())
        if result.error and result.error.get("log"):
            print("\n" + result.error["log"].strip()[-3000:])
        print(f"artifacts: {result.artifacts}")
    return EXIT_CORRECT if result.ok else EXIT_VERDICT


def cmd_run(args) -> int:
    from .problem import Problem
    from .session.config import resume_from_args, session_from_args
    from .ui.terminal import Progress, TerminalPolicy
    policy = TerminalPolicy() if args.review else None
    if args.resume:
        if args.reference:
            return usage_error("--resume continues a saved run with its own reference; give "
                               "either a reference or --resume RUN_DIR, not both")
        session = resume_from_args(args, policy)
    elif not args.reference:
        return usage_error("kforge run needs a reference file (or --resume RUN_DIR)")
    else:
        session = session_from_args(Problem.from_file(args.reference), args, policy)
    session.subscribe(Progress(), replay=False)    # a resumed run says where it picks up
    try:
        session.run()
    except KeyboardInterrupt:                      # saved as interrupted by the session
        return usage_error(f"interrupted; the run is saved: go on with kforge run --resume "
                           f"{session.folder}")
    summary = session.summary()
    if args.json:
        print(json.dumps(summary, default=str))
    else:
        print(history_table(session))
        if session.best:
            print(f"best kernel: {summary['artifacts']}/best_candidate.py")
    if session.error:
        print(f"kforge: {session.error}", file=sys.stderr)
        bad_setup = session.finish_reason.startswith(("provider error", "bad input"))
        return EXIT_USAGE if bad_setup else EXIT_VERDICT
    return EXIT_CORRECT if session.best else EXIT_VERDICT


def cmd_bench(args) -> int:
    import dataclasses
    from .agents import AgentConfig
    from .bench import problem_files, run_suite, table
    from .session import Budget
    from .session.config import eval_options
    files = problem_files(args.problems)
    if not files:
        return usage_error(f"no problem files in {' '.join(args.problems)}")

    def progress(row):
        print(f"{row.problem}: {row.state} ({row.seconds:.0f} s)", file=sys.stderr, flush=True)
    rows = run_suite(files, args.target, AgentConfig(provider=args.provider, model=args.model),
                     Budget(iterations=args.iterations, samples=args.samples),
                     eval_options(args), args.out, progress)
    print(json.dumps([dataclasses.asdict(r) for r in rows]) if args.json else table(rows))
    return EXIT_CORRECT if all(r.state == "correct" for r in rows) else EXIT_VERDICT


def cmd_runs(args) -> int:
    from .session import saved
    folder = Path(args.folder)
    if not folder.is_dir():
        return usage_error(f"{args.folder!r} is not a folder")
    runs = saved.list_runs(folder)
    if args.json:
        print(json.dumps([{"folder": str(r[0]), "status": "damaged", "error": r[1]}
                          if isinstance(r, tuple) else
                          {"folder": str(r.folder), "status": r.status,
                           "iterations_done": r.iterations_done,
                           "iterations_budget": r.iterations_budget, **r.summary}
                          for r in runs], default=str))
    elif not runs:
        print(f"no runs under {folder} (a run folder holds run.json)")
    else:
        print(saved.runs_table(runs))
        if any(not isinstance(r, tuple) and r.status == "interrupted" for r in runs):
            print(f"\ngo on with one: kforge run --resume {folder}/RUN")
    return EXIT_CORRECT


def history_table(session) -> str:
    rows = [("iter", "sample", "kind", "state", "ms", "vs eager", "vs compile")]
    for a in session.history:
        t = a.result.timing
        rows.append((str(a.iteration), str(a.sample), a.kind, a.result.state,
                     f"{t.candidate_ms:.4g}" if t.candidate_ms else "-",
                     f"{t.speedup_vs_eager:.2f}x" if t.speedup_vs_eager else "-",
                     f"{t.speedup_vs_compile:.2f}x" if t.speedup_vs_compile else "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    s = session.summary()
    lines.append(f"tokens: {s['input_tokens']} in, {s['output_tokens']} out; estimated cost "
                 f"${s['cost_usd']:.4f}" + (f" (+{s['unpriced_calls']} calls to unpriced models)"
                                            if s["unpriced_calls"] else ""))
    return "\n".join(lines)


def usage_error(message: str) -> int:
    print(f"kforge: {message}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    from .problem import ProblemError
    from .providers import ProviderError
    from .session.saved import ResumeError
    from .targets import UnknownTarget
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ProblemError, UnknownTarget, ProviderError, FileNotFoundError, ResumeError) as err:
        return usage_error(str(err))
    except KeyboardInterrupt:
        return usage_error("interrupted")


if __name__ == "__main__":
    sys.exit(main())
