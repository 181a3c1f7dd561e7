"""How much one kernel's speedup moves from one judging to the next.

    PYTHONPATH=. python benchmarks/judge_repeat.py --seed S --index K [--scale gpu]
        [--target triton] [--times 6] [--trials 2]

Writes the builtin agent's first candidate for problem K of a seeded random draw
(benchmarks/random_problems.py) and judges that same code `--times` times in a row, each in a
fresh evaluation, printing each judging's eager and candidate medians, the speedup (a median of
paired ratios) and its within-judging spread. A search names its best from such judgings, so
their spread across judgings bounds what a search can tell apart (see docs/search-*.md).
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from kforge_nb.agents.base import GenerationRequest  # noqa: E402
from kforge_nb.agents.builtin.generator import BuiltinGenerator  # noqa: E402
from kforge_nb.evaluator import EvalOptions  # noqa: E402
from kforge_nb.executors import InProcess  # noqa: E402
from kforge_nb.problem import Problem  # noqa: E402
from kforge_nb.session.core import with_allowed  # noqa: E402
from kforge_nb.targets import get_target  # noqa: E402
from random_problems import write_draw  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--index", type=int, required=True, help="the problem of the draw")
    parser.add_argument("--draw", type=int, default=12)
    parser.add_argument("--scale", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--target", default="cpp")
    parser.add_argument("--times", type=int, default=6)
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--out", default="kforge-runs/judge-repeat")
    args = parser.parse_args()
    out = Path(args.out)
    path = write_draw(out / "draw", args.seed, args.draw, args.scale)[args.index]
    problem = Problem.from_file(path)
    made = BuiltinGenerator().generate(GenerationRequest(problem=problem, target=args.target,
                                                         kind="initial"))
    if made.code is None:
        sys.exit(f"{problem.name}: {made.failure}")
    options = with_allowed(EvalOptions(trials=args.trials, baselines=("eager",)), made.kept_ops)
    print(f"{problem.name} on {args.target}: the same candidate judged {args.times} times")
    print("| judging | state | eager ms | candidate ms | speedup | spread of ratios |")
    print("|---|---|---|---|---|---|")
    speedups = []
    for k in range(args.times):
        r = InProcess().evaluate(problem, made.code, get_target(args.target), options,
                                 out / f"judging-{k}")
        t = r.timing
        if t.speedup_vs_eager:
            speedups.append(t.speedup_vs_eager)
        fmt = lambda v, s=".4g": "-" if v is None else f"{v:{s}}"  # noqa: E731
        print(f"| {k} | {r.state} | {fmt(t.eager_ms)} | {fmt(t.candidate_ms)} | "
              f"{fmt(t.speedup_vs_eager, '.3f')} | {fmt(t.speedup_spread, '.2f')} |", flush=True)
    if len(speedups) > 1:
        print(f"\nspeedup: median {statistics.median(speedups):.3f}, min {min(speedups):.3f}, "
              f"max {max(speedups):.3f} (max/min {max(speedups) / min(speedups):.2f})")


if __name__ == "__main__":
    main()
