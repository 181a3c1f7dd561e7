"""Speedups under a precision policy, against fp32 eager and against PyTorch under the same policy.

    KFORGE_SIZE=gpu PYTHONPATH=. python benchmarks/precision_baselines.py [--precision bf16]
        [--candidates DIR] [--target auto] [--iterations 1] [--only REGEX]
        [--no-compile-baseline] [--out DIR] [--restart]

"5x vs fp32 eager" for a bf16 GEMM hides that cuBLAS in bf16 is several times faster too. This
judges the level-2 GEMM problems of benchmarks/problems/ (level 2 with a `linear` in the suite
README's ops column) with `--precision bf16`, given candidates (`--candidates DIR`, as `kforge
bench --candidates`) or the builtin agent, and prints per problem the speedup over fp32 eager,
over eager under the policy (autocast: timed in the same interleaved rounds, a median of paired
ratios) and over torch.compile under the policy (a cached display, like the fp32 one).

The same Bench as `kforge bench` (kforge_nb/bench/): rows are kept under --out, and a run cut
short resumes where it stopped. On a machine without a GPU `--target auto` is the cpp target
(real CPU timings; fp16 autocast is not timed on the CPU, the table says why); Triton there runs
under its interpreter, which is not a timing, so it is refused.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kforge_nb.agents import AgentConfig  # noqa: E402
from kforge_nb.bench import Bench, Progress, Store  # noqa: E402
from kforge_nb.bench.suite import entries  # noqa: E402
from kforge_nb.evaluator import EvalOptions  # noqa: E402
from kforge_nb.guardrails import Guardrails  # noqa: E402
from kforge_nb.session import Budget  # noqa: E402

SUITE = ROOT / "benchmarks" / "problems"


def gemm_problems() -> list[str]:
    """Level-2 problems whose ops (the suite README's table) include a linear layer."""
    readme = (SUITE / "README.md").read_text()
    return [name for name, level, ops in re.findall(r"^\| `(\w+)` \| (\d) \| ([^|]+) \|",
                                                    readme, re.MULTILINE)
            if level == "2" and "linear" in ops]


def cell(value, spec: str = ".2f", suffix: str = "x") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def table(rows, precision: str) -> str:
    head = ["problem", "state", "cand ms", "x fp32 eager", f"x {precision} eager",
            f"x {precision} compile"]
    lines = [head] + [[r.id, r.state, cell(r.candidate_ms, ".4f", ""),
                       cell(r.speedup_vs_eager), cell(r.speedup_vs_eager_policy),
                       cell(r.speedup_vs_compile_policy)] for r in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in
                     enumerate(zip(line, widths))) for line in lines]
    out.insert(1, "-" * len(out[0]))
    for policy in dict.fromkeys(r.policy for r in rows if r.policy):
        out.append(f"under the policy: {policy}")
    if any(r.real is False for r in rows):
        out.append("NOTE: some timings are not performance figures (Triton's interpreter)")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--precision", default="bf16", choices=["tf32", "bf16", "fp16"])
    parser.add_argument("--candidates", help="judge these kernels instead of running the agent")
    parser.add_argument("--target", default="auto")
    parser.add_argument("--iterations", type=int, default=1, help="the builtin agent's rounds")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--only", help="regex on problem names")
    parser.add_argument("--no-compile-baseline", action="store_true")
    parser.add_argument("--out", default="kforge-runs/precision-baselines")
    parser.add_argument("--restart", action="store_true", help="start the bench folder over")
    args = parser.parse_args()

    import torch
    gpu = torch.cuda.is_available()
    target = args.target if args.target != "auto" else "triton" if gpu else "cpp"
    if target == "triton" and not gpu:
        sys.exit("Triton without a GPU runs under its interpreter, which is not a timing: "
                 "use --target cpp here, or run this on a GPU machine")
    names = [n for n in gemm_problems() if args.only is None or re.search(args.only, n)]
    suite = entries([SUITE / f"{n}.py" for n in names])
    options = EvalOptions(trials=args.trials, precision=args.precision,
                          guardrails=Guardrails(precision=args.precision),
                          baselines=("eager",) if args.no_compile_baseline else
                          ("eager", "compile"))
    size = os.environ.get("KFORGE_SIZE", "cpu")
    settings = {"target": target, "precision": args.precision, "size": size,
                "iterations": args.iterations, "trials": args.trials,
                "candidates": args.candidates, "compile_baseline": not args.no_compile_baseline}
    mode = "candidates" if args.candidates else "builtin"
    store = Store(Path(args.out) / f"{args.precision}-{target}-{size}-{mode}", settings,
                  restart=args.restart)

    class Lines(Progress):
        def finished_row(self, row):
            print(f"{row.id}: {row.state}, {cell(row.speedup_vs_eager)} fp32 eager, "
                  f"{cell(row.speedup_vs_eager_policy)} {args.precision} eager "
                  f"({row.seconds:.0f} s)", file=sys.stderr, flush=True)

    print(f"{len(suite)} GEMM problems, --precision {args.precision}, target {target}, "
          f"size {size}, {mode}; rows in {store.folder}", file=sys.stderr)
    rows = Bench(suite, target, store, agents=AgentConfig(provider="builtin"),
                 budget=Budget(iterations=args.iterations, patience=2), options=options,
                 candidates=args.candidates).run(Lines())
    print(table(rows, args.precision))


if __name__ == "__main__":
    main()
