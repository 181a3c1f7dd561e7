"""The evaluation engine scaled out: one suite of candidates judged by each executor.

    PYTHONPATH=. python benchmarks/scale_out.py PROBLEMS --candidates DIR [--target triton]
        [--workers 1 2] [--dask 2] [--out kforge-runs/scale-out]
    PYTHONPATH=. python benchmarks/scale_out.py PROBLEMS --from-bench BENCH_FOLDER ...

Only the evaluator runs (no agent): the wall time is the engine's. `--from-bench` takes each
problem's best kernel from a finished `kforge bench` folder. Each executor gets a fresh bench
folder; the table gives wall time, its ratio to the first executor, and whether the verdicts
(the state of every problem) are the same as the first executor's. `--dask N` adds a Dask
LocalCluster of N single-thread worker processes (GPU=1 each where a GPU is present).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kforge_nb.bench import Bench, Store, entries, geomean  # noqa: E402
from kforge_nb.evaluator import EvalOptions  # noqa: E402
from kforge_nb.executors import make_executor  # noqa: E402


def candidates_from_bench(folder: Path, out: Path) -> Path:
    """Each correct row's best kernel, written as out/<id>.py."""
    for row in json.loads((folder / "results.json").read_text())["rows"]:
        best = Path(row["folder"]) / "best_candidate.py"
        if row["state"] == "correct" and best.is_file():
            (out / f"{row['id']}.py").parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(best, out / f"{row['id']}.py")
    return out


def run(label, executor, suite, args, candidates, out) -> dict:
    options = EvalOptions(trials=args.trials, baselines=("eager", "compile"))
    store = Store(out / label, {"label": label}, restart=True)
    bench = Bench(suite, args.target, store, executor, options=options, candidates=candidates)
    started = time.monotonic()
    with executor:
        rows = bench.run()
    wall = time.monotonic() - started
    timed = [r for r in rows if r.correct and r.real]
    return {"label": label, "wall_s": wall, "rows": rows, "states": {r.id: r.state for r in rows},
            "correct": sum(r.correct for r in rows),
            "geomean": geomean([r.speedup_vs_eager for r in timed])}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("problems", nargs="+")
    parser.add_argument("--candidates")
    parser.add_argument("--from-bench")
    parser.add_argument("--target", default="auto")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--dask", type=int, default=0, help="also a Dask LocalCluster of N")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--out", default="kforge-runs/scale-out")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    candidates = Path(args.candidates) if args.candidates else candidates_from_bench(
        Path(args.from_bench), out / "candidates")
    suite = entries(args.problems)

    results = [run(f"workers-{n}", make_executor(n), suite, args, candidates, out)
               for n in args.workers]
    if args.dask:
        import torch
        from distributed import LocalCluster
        gpu = {"GPU": 1} if torch.cuda.is_available() else {}
        with LocalCluster(n_workers=args.dask, threads_per_worker=1, processes=True,
                          resources=gpu, dashboard_address=None) as cluster:
            results.append(run(f"dask-{args.dask}", make_executor(cluster=cluster.scheduler_address),
                               suite, args, candidates, out))

    first = results[0]
    print(f"{len(suite)} problems, target {args.target}, candidates from {candidates}")
    print(f"{'executor':12} {'wall s':>8} {'x first':>8} {'correct':>8} {'geomean x eager':>16} "
          f"{'same verdicts':>14}")
    for r in results:
        print(f"{r['label']:12} {r['wall_s']:8.1f} {first['wall_s'] / r['wall_s']:8.2f} "
              f"{r['correct']:>8} {r['geomean'] or 0:16.2f} "
              f"{str(r['states'] == first['states']):>14}")
    for r in results[1:]:
        differ = {i: (first["states"].get(i), s) for i, s in r["states"].items()
                  if first["states"].get(i) != s}
        if differ:
            print(f"{r['label']}: verdicts differing from {first['label']}: {differ}")


if __name__ == "__main__":
    main()
