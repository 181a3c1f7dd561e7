"""The builtin agent over KernelBench level 1 + 2 at their own sizes, resumable across device calls.

A device call may run 10 minutes and brings back only what is under $OUT, so one run is many
calls: each resumes the bench folder carried in (`kforge bench`'s own resume: finished problems
are read back from results.jsonl), runs problems until `--stop-after` seconds from its start,
stops the sessions under way (after their current step; their problems rerun next call), cuts
off any still going `--grace` seconds later, and packs the folder into one tar.gz under $OUT
(results, and each run's small text files: kernels, verdicts, summaries; no traces). Workers:
one per visible GPU (`kforge bench --workers N` pins each to its own). Strict fp32, target
triton, 2 iterations, 3 trials by default; keep the settings the same from call to call (the
bench refuses to resume otherwise). Exit 0 once every problem has a row, 3 before.

Once, on this machine (kforge-runs/ is git-ignored; problem files are test data):

    mkdir -p kforge-runs/kb kforge-runs/kb-gpu
    cp -r /tmp/kb/KernelBench/level1 /tmp/kb/KernelBench/level2 kforge-runs/kb/

Each device call (the same command, carry ["kforge-runs/kb", "kforge-runs/kb-gpu"]):

    PYTHONPATH=. python3 benchmarks/kernelbench_gpu.py kforge-runs/kb \
        --results kforge-runs/kb-gpu --stop-after 500 --grace 60 \
        --pack $OUT/kb-gpu.tar.gz --table

then, back here, the pack replaces the folder before the next call:

    rm -rf kforge-runs/kb-gpu && mkdir kforge-runs/kb-gpu && \
        tar -xzf FILES_AT/kb-gpu.tar.gz -C kforge-runs/kb-gpu

and the tables: `python benchmarks/kernelbench_table.py
kforge-runs/kb-gpu/bench-kb-triton-builtin --problems kforge-runs/kb`. More `kforge bench`
flags go after `--`. On a CPU: `--target cpp --iterations 1` (tests/test_kernelbench_small.py
runs it with Triton's interpreter).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tarfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

# files of a run folder worth bringing back (kernels, verdicts, summaries), and their size cap
KEPT_SUFFIXES = {".py", ".json", ".jsonl", ".md", ".txt", ".csv", ".log", ".cpp", ".cu"}
KEPT_MAX_BYTES = 256 << 10


def gpu_count() -> int:
    try:
        import torch
        return torch.cuda.device_count()
    except Exception:
        return 0


def bench_args(problems: Path, results: Path, args: argparse.Namespace, workers: int):
    """`kforge bench`'s own options, as its parser gives them (the same defaults)."""
    from kforge_nb.cli import build_parser
    line = ["bench", str(problems), "--out", str(results), "--provider", "builtin",
            "--target", args.target, "--iterations", str(args.iterations),
            "--trials", str(args.trials), "--precision", "strict", "--workers", str(workers),
            "--wall-time", str(args.wall_time)]
    return build_parser().parse_args(line + args.bench_flags)


def moved_here(results: Path, problems: Path) -> None:
    """The repo sits at another path on each machine: a bench carried in names its problem
    folder by where it was; the same folder by name is the same bench."""
    for saved in results.glob("bench-*/bench.json"):
        settings = json.loads(saved.read_text())
        named = [Path(p).name for p in settings.get("problems", [])]
        if named == [problems.resolve().name]:
            settings["problems"] = [str(problems.resolve())]
            saved.write_text(json.dumps(settings, indent=1))


class Lines:
    """The bench's progress as one line per finished problem (no tqdm, no terminal)."""

    def started(self, total, done, bench):
        print(f"{total} problems, {done} finished earlier; {bench.executor.describe()}; "
              f"folder {bench.store.folder}", flush=True)

    def begun(self, id):
        pass

    def finished_row(self, row):
        speed = f" {row.speedup_vs_eager:.2f}x eager" if row.speedup_vs_eager else ""
        speed += f" {row.speedup_vs_compile:.2f}x compile" if row.speedup_vs_compile else ""
        print(f"{time.strftime('%H:%M:%S')} {row.id}: {row.state}{speed} "
              f"({row.seconds:.0f} s)" + (f" {row.note[:120]}" if not row.correct else ""),
              flush=True)

    def ended(self, rows):
        pass


def no_late_starts(bench, deadline: float) -> None:
    """A problem not begun by `deadline` (time.monotonic()) is not begun this call: its row is
    `interrupted`, which the bench does not save, so the next call runs it from the start."""
    from kforge_nb.bench.report import Row
    one = bench.one

    def one_in_time(entry, progress):
        if time.monotonic() > deadline:
            return Row(entry.id, "interrupted", note="not begun: too close to the stop")
        return one(entry, progress)
    bench.one = one_in_time


def run_until(bench, stop_after: float, grace: float) -> str:
    """Run the bench; at `stop_after` s stop it, and at `stop_after + grace` give up on the
    sessions still going (their problems rerun next call). Returns how it ended."""
    from kforge_nb.executors import ExecutorError
    ended = {"how": "the bench ended"}

    def run():
        try:
            with bench.executor:
                bench.run(Lines())
        except ExecutorError as err:
            ended["how"] = str(err)
        except Exception as err:             # said, and the pack is still written
            ended["how"] = f"{type(err).__name__}: {err}"

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(stop_after)
    if thread.is_alive():
        print(f"{time.strftime('%H:%M:%S')}: the stop (after {stop_after:.0f} s of running): "
              f"stopping the sessions under way", flush=True)
        bench.stop()
        thread.join(grace)
    if thread.is_alive():
        ended["how"] = f"sessions still going {grace:.0f} s after the stop: cut off"
        kill_children()
    return ended["how"]


def kill_children() -> None:
    """This process's own descendants (evaluation workers, their compilers), killed; read off
    /proc (Linux), so that nothing outlives a cut-off call."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            parents[int(stat.parent.name)] = int(fields[1])
        except (OSError, ValueError, IndexError):
            continue
    mine, grew = {os.getpid()}, True
    while grew:
        found = {pid for pid, parent in parents.items() if parent in mine} - mine
        mine |= found
        grew = bool(found)
    for pid in mine - {os.getpid()}:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def pack(folder: Path, to: Path) -> Path:
    """The bench folder as one tar.gz: its tables and results, and of each run only its small
    text files (kernels, verdicts, summaries), not traces or builds."""
    to.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(to, "w:gz") as tar:
        for path in sorted(folder.rglob("*")):
            relative = path.relative_to(folder.parent)
            top = path.parent == folder
            small = path.is_file() and path.suffix in KEPT_SUFFIXES and \
                "trace" not in path.name and "workers" not in relative.parts and \
                path.stat().st_size <= KEPT_MAX_BYTES
            if path.is_file() and (top or small) and path.name != "bench.lock":
                tar.add(path, arcname=str(relative))
    return to


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("problems", help="a folder holding level1/ and level2/ (nothing else)")
    p.add_argument("--results", default="kforge-runs/kb-gpu", help="the bench's parent folder")
    p.add_argument("--target", default="triton")
    p.add_argument("--iterations", type=int, default=2)
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--workers", type=int, help="default: one per GPU (1 without a GPU)")
    p.add_argument("--stop-after", type=float, default=480.0,
                   help="seconds before the sessions under way are stopped")
    p.add_argument("--grace", type=float, default=60.0,
                   help="seconds they may take to stop before they are cut off")
    p.add_argument("--no-start-after", type=float, default=60.0, metavar="S",
                   help="begin no problem in the last S seconds before --stop-after")
    p.add_argument("--wall-time", type=float, default=360.0,
                   help="a problem's session ends itself after this many seconds (between "
                   "steps), so that a long one still finishes within one call")
    p.add_argument("--pack", help="write the bench folder here as a .tar.gz (under $OUT)")
    p.add_argument("--table", action="store_true", help="print the tables at the end")
    p.add_argument("--seed", type=int, default=20261126, help="the table's draw")
    p.add_argument("--draw", type=int, default=40, help="the table's draw")
    p.epilog = "after --: more `kforge bench` flags (keep them the same every call)"
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args = p.parse_args(argv[:cut])
    args.bench_flags = argv[cut + 1:]
    return args


def main() -> int:
    args = parse()
    started = time.monotonic()
    from kforge_nb.bench.config import bench_from_args
    problems, results = Path(args.problems), Path(args.results)
    workers = args.workers or max(1, gpu_count())
    results.mkdir(parents=True, exist_ok=True)
    moved_here(results, problems)
    bench = bench_from_args(bench_args(problems, results, args, workers))
    stop_at = started + args.stop_after
    no_late_starts(bench, stop_at - args.no_start_after)
    how = run_until(bench, max(1.0, stop_at - time.monotonic()), args.grace)
    rows = bench.rows()
    print(f"{how}; {len(rows)}/{len(bench.entries)} problems finished "
          f"({sum(r.correct for r in rows)} correct) in {bench.store.folder}", flush=True)
    if args.pack:
        print(f"packed: {pack(bench.store.folder, Path(args.pack))}", flush=True)
    if args.table:
        from kernelbench_table import tables
        print(tables([r.__dict__ for r in rows], [e.id for e in bench.entries], args.draw,
                     args.seed))
    sys.stdout.flush()
    os._exit(0 if len(rows) == len(bench.entries) else 3)    # not waiting on a cut-off session


if __name__ == "__main__":
    main()
