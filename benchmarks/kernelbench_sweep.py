"""KernelBench problems at their own sizes through the evaluator, each judged against itself.

The candidate is the reference's own forward (`class ModelNew(Model): pass`, allowed with
`--allow '*'`), so every verdict should be `correct` at ~1.0x: what is measured is whether the
evaluator survives real sizes (6.4 GB tensors), how much host memory its workers take, and how
steady its side-by-side speedup is.

Problem files are test data, not part of this repository: fetch KernelBench and point this at
its `KernelBench/level1` and `level2` folders.

    PYTHONPATH=. python3 benchmarks/kernelbench_sweep.py KB/level1 KB/level2 \
        --pick 19_ReLU 23_Softmax --draw 20 --seed 7 --json sweep.json

`--pick` names problems always run (substring match); `--draw N --seed S` adds a seeded random
draw of N others that nobody tuned on. Prints one markdown table and a summary line.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("KFORGE_CACHE", tempfile.mkdtemp(prefix="kforge-cache-"))

from kforge_nb.evaluator import EvalOptions, evaluate  # noqa: E402
from kforge_nb.guardrails import Guardrails  # noqa: E402
from kforge_nb.problem import Problem, ProblemError  # noqa: E402

SELF_CANDIDATE = "\n\nclass ModelNew(Model):\n    pass\n"


def choose(folders: list[str], pick: list[str], draw: int, seed: int) -> list[tuple[Path, str]]:
    files = sorted(f for d in folders for f in Path(d).glob("*.py"))
    picked = [f for f in files if any(p in f.stem for p in pick)]
    rest = [f for f in files if f not in picked]
    drawn = random.Random(seed).sample(rest, min(draw, len(rest)))
    return [(f, "picked") for f in picked] + [(f, f"draw(seed={seed})") for f in drawn]


def judge(path: Path, target: str, out: Path, trials: int) -> dict:
    started = time.monotonic()
    row = {"problem": f"{path.parent.name}/{path.stem}"}
    try:
        problem = Problem.from_file(path)
        options = EvalOptions(guardrails=Guardrails(allow=["*"]), baselines=("eager",),
                              timeout_s=900, timing_budget_s=0.5, out_dir=out, trials=trials)
        result = evaluate(problem, problem.source + SELF_CANDIDATE, target, options)
    except ProblemError as err:
        return {**row, "state": "problem_error", "message": str(err)[:300],
                "seconds": round(time.monotonic() - started, 1)}
    t, res = result.timing, result.resources
    peak = max(res.get("reference_peak_gib", 0), res.get("candidate_peak_gib", 0))
    data = res.get("min_gib_moved") or 0
    return {**row, "state": result.state, "speedup": t.speedup_vs_eager,
            "spread": t.speedup_spread, "candidate_ms": t.candidate_ms, "eager_ms": t.eager_ms,
            "data_gib": data, "peak_host_gib": peak,
            "peak_over_data": round(peak / data, 2) if data else None,
            "seconds": round(time.monotonic() - started, 1),
            "message": "" if result.state == "correct" else result.message[:300]}


def fmt(v, spec=".3g"):
    return "" if v is None else format(v, spec) if isinstance(v, float) else str(v)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+")
    parser.add_argument("--pick", nargs="*", default=[])
    parser.add_argument("--draw", type=int, default=0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--target", default="triton")
    parser.add_argument("--trials", type=int, default=5, help="correctness trials (default 5)")
    parser.add_argument("--all", action="store_true", help="every problem in the folders")
    parser.add_argument("--shard", default="1/1", help="I/N: the I-th of N slices of the list")
    parser.add_argument("--skip", nargs="*", default=[], metavar="JSON",
                        help="earlier --json outputs: problems already judged there are skipped")
    parser.add_argument("--json")
    args = parser.parse_args()
    done = {r["problem"] for f in args.skip if Path(f).exists() for r in json.loads(Path(f).read_text())}
    out = Path(tempfile.mkdtemp(prefix="kforge-sweep-"))
    rows = []
    print("| problem | set | state | speedup (paired) | spread | data GiB | peak host GiB | "
          "peak/data | s |\n|---|---|---|---|---|---|---|---|---|", flush=True)
    chosen = choose(args.folders, args.pick, args.draw, args.seed) if not args.all else [
        (f, "all") for f in sorted(f for d in args.folders for f in Path(d).glob("*.py"))]
    i, n = map(int, args.shard.split("/"))
    chosen = [(f, how) for f, how in chosen if f"{f.parent.name}/{f.stem}" not in done]
    for path, how in chosen[i - 1::n]:
        row = {**judge(path, args.target, out, args.trials), "set": how}
        rows.append(row)
        print(f"| {row['problem']} | {how} | {row['state']} | {fmt(row.get('speedup'))} | "
              f"{fmt(row.get('spread'), '.0%')} | {fmt(row.get('data_gib'))} | "
              f"{fmt(row.get('peak_host_gib'))} | {fmt(row.get('peak_over_data'))} | "
              f"{row['seconds']} |" + (f" {row['message'][:160]}" if row.get("message") else ""),
              flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
    correct = [r for r in rows if r["state"] == "correct"]
    speedups = [r["speedup"] for r in correct if r.get("speedup")]
    print(f"\n{len(correct)}/{len(rows)} correct; median paired speedup "
          f"{statistics.median(speedups):.3f}x (ideal 1.0)" if speedups else "no speedups")


if __name__ == "__main__":
    main()
