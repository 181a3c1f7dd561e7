"""Two runs of search_compare.py (two commits, say) judged head to head: is the newer agent's
best kernel faster than the older one's, on the same draw?

    PYTHONPATH=. python benchmarks/compare_runs.py OLD_OUT NEW_OUT [--strategy greedy]
        [--rounds 5] [--target cpp]

OLD_OUT and NEW_OUT are the --out folders of two search_compare.py runs on the same seed (run
the older commit from a `git worktree`). For each problem both runs finished, the two best
kernels are judged in turn `--rounds` times by this checkout's evaluator and compared by their
median speedup vs eager (a ratio timed within one evaluation); "faster" needs the same 2 %
margin as search_compare.py.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from search_compare import head_to_head, verdict  # noqa: E402

from kforge_nb.problem import Problem  # noqa: E402
from kforge_nb.session import saved  # noqa: E402


def best_kernel(out: Path, problem: str, strategy: str) -> tuple[str, list[str]] | None:
    """The run's best kernel and the torch ops its generation kept on purpose (recorded in
    that sample's generation.json), or None when the run left no best."""
    found = sorted((out / problem / strategy).glob("*/best_candidate.py"))
    if not found:
        return None
    folder, code = found[-1].parent, found[-1].read_text()
    for attempt in saved.read(folder).data["history"]:
        if attempt.get("code") == code:
            generation = (folder / f"iter-{attempt['iteration']:02d}" /
                          f"sample-{attempt['sample']}" / "generation.json")
            if generation.is_file():
                return code, json.loads(generation.read_text()).get("kept_ops", [])
    return code, []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--strategy", default="greedy")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--target", default="cpp")
    args = parser.parse_args()
    draws = sorted(args.new.glob("draw-*"))
    if not draws:
        parser.error(f"{args.new} holds no draw-* folder: not a search_compare.py --out")
    lines = [f"| problem | {args.strategy} in {args.old} | in {args.new} | new/old |",
             "|---|---|---|---|"]
    ratios = []
    for path in sorted(draws[0].glob("*.py")):
        kernels = {"old": best_kernel(args.old, path.stem, args.strategy),
                   "new": best_kernel(args.new, path.stem, args.strategy)}
        if None in kernels.values():
            lines.append(f"| {path.stem} | - | - | not in both runs |")
            continue
        if kernels["old"][0] == kernels["new"][0]:
            ratios.append(1.0)
            lines.append(f"| {path.stem} | same kernel | same kernel | 1.000 tie |")
            continue
        medians = head_to_head(Problem.from_file(path), kernels, args, args.new / path.stem)
        if len(medians) < 2:
            lines.append(f"| {path.stem} | - | - | not judged correct in both |")
            continue
        ratio = medians["new"] / medians["old"]
        ratios.append(ratio)
        lines.append(f"| {path.stem} | {medians['old']:.2f}x | {medians['new']:.2f}x | "
                     f"{ratio:.3f} {verdict(ratio)} |")
        print(lines[-1], file=sys.stderr, flush=True)
    faster = sum(verdict(r) == "faster" for r in ratios)
    slower = sum(verdict(r) == "slower" for r in ratios)
    lines += ["", f"new faster on {faster}/{len(ratios)} problems, slower on {slower}, "
              f"geomean ratio {statistics.geometric_mean(ratios):.3f}" if ratios else
              "no problem in both runs"]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
