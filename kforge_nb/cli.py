"""`kforge`: the command line, a thin shell over the library.

    kforge eval REF CAND [--target T] [--json] ...   judge one candidate (exit 0 iff correct)
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import __version__

EXIT_CORRECT, EXIT_VERDICT, EXIT_USAGE = 0, 1, 2


def add_eval_options(p: argparse.ArgumentParser) -> None:
    """Options shared by every command that evaluates candidates."""
    from .evaluator.correctness import POLICIES
    p.add_argument("--target", default="auto", help="cpp, triton, cuda, metal or auto "
                   "(triton with a CUDA GPU, cpp otherwise)")
    p.add_argument("--trials", type=int, default=5, help="correctness trials, each with fresh "
                   "random inputs (default 5)")
    p.add_argument("--timeout", type=float, default=180.0, help="seconds a candidate may take "
                   "(default 180)")
    p.add_argument("--out", default="kforge-runs", help="artifacts folder (default kforge-runs)")
    p.add_argument("--precision", choices=POLICIES, default="strict", help="precision policy: "
                   "strict fp32 by default; tf32/bf16/fp16 loosen tolerances and allow casts")
    p.add_argument("--ban", action="append", default=[], metavar="REGEX",
                   help="reject candidates whose source matches REGEX (repeatable)")
    p.add_argument("--require", action="append", default=[], metavar="REGEX",
                   help="reject candidates whose source does not match REGEX (repeatable)")
    p.add_argument("--allow", action="append", default=[], metavar="OP",
                   help="allow a torch op in ModelNew.forward, e.g. torch.conv2d (repeatable)")
    p.add_argument("--no-compile-baseline", action="store_true",
                   help="skip timing torch.compile (its first compile takes ~30 s on a small CPU)")
    p.add_argument("--no-shape-check", action="store_true",
                   help="skip the extra trial at another batch size")


def eval_options(args):
    from .evaluator import EvalOptions
    from .guardrails import Guardrails
    return EvalOptions(
        trials=args.trials, timeout_s=args.timeout, precision=args.precision, out_dir=args.out,
        guardrails=Guardrails(bans=args.ban, requires=args.require, allow=args.allow,
                              precision=args.precision),
        baselines=("eager",) if args.no_compile_baseline else ("eager", "compile"),
        shape_check=not args.no_shape_check)


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
    return parser


def cmd_eval(args) -> int:
    from .evaluator import evaluate
    from .problem import Problem
    from .targets import get_target
    candidate_path = Path(args.candidate)
    if not candidate_path.is_file():
        return usage_error(f"candidate file {args.candidate!r} does not exist")
    problem = Problem.from_file(args.reference)
    target = get_target(args.target)
    if not args.json:
        print(f"kforge eval: {candidate_path.name} vs {problem.label} on {target.name} "
              f"({target.device()})", file=sys.stderr)
    result = evaluate(problem, candidate_path.read_text(), target, eval_options(args))
    if args.json:
        print(json.dumps(result.to_dict(), default=str))
    else:
        print(result.summary())
        if result.error and result.error.get("log"):
            print("\n" + result.error["log"].strip()[-3000:])
        print(f"artifacts: {result.artifacts}")
    return EXIT_CORRECT if result.ok else EXIT_VERDICT


def usage_error(message: str) -> int:
    print(f"kforge: {message}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    from .problem import ProblemError
    from .targets import UnknownTarget
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ProblemError, UnknownTarget) as err:
        return usage_error(str(err))
    except KeyboardInterrupt:
        return usage_error("interrupted")


if __name__ == "__main__":
    sys.exit(main())
