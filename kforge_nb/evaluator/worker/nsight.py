"""Nsight Compute's hardware counters for a correct candidate, where `ncu` is on the PATH.

`ncu` profiles a process it starts, so the candidate worker (inside its sandbox) starts
`ncu ... python -m kforge_nb.evaluator.worker.nsight JOB.json`: a child that rebuilds the candidate
with the judged weights, warms it up (Triton compiles on the first call) and runs one forward
between cudaProfilerStart and Stop, so only that call's kernels are replayed. The child inherits
the worker's namespaces and scrubbed environment; its output is never a verdict, only the
counters the analysis agent reads beside the torch profiler's timeline.

The counters are shares and counts (throughput as % of peak, occupancy, registers): the time
is the evaluator's own, and `--clock-control none` leaves the clocks as the timing saw them.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

# metric -> how the analyst is told it
METRICS = {
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "compute {:.0f}% of peak",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM {:.0f}% of peak",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy {:.0f}%",
    "launch__registers_per_thread": "{:.0f} registers/thread",
}
MAX_KERNELS = 12          # replayed launches per candidate: each costs several passes


def command(target: str) -> list[str] | None:
    """The `ncu` prefix for a candidate of `target`, or None: not a CUDA target, or no ncu."""
    if target not in ("cuda", "triton") or not shutil.which("ncu"):
        return None
    return ["ncu", "--csv", "--page", "raw", "--metrics", ",".join(METRICS),
            "--clock-control", "none", "--profile-from-start", "off",
            "--launch-count", str(MAX_KERNELS)]


def parse_csv(text: str) -> list[dict]:
    """`ncu --csv --page raw` output: a header row ("ID", ..., "Kernel Name", metrics), a row
    of units, a row per profiled kernel; the program's own output and ncu's ==PROF== lines may
    come first. [{"name", metric: value}] with each metric of METRICS found."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        return []
    header, *rows = csv.reader(lines[start:])
    kernels = []
    for row in rows[1:]:                        # rows[0] holds the units
        cells = dict(zip(header, row))
        if len(row) == len(header):
            kernels.append({"name": cells.get("Kernel Name", "?"),
                            **{m: number(cells[m]) for m in METRICS if m in cells}})
    return kernels


def number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))     # ncu groups thousands: "5,344"
    except ValueError:
        return None                             # "n/a"


def profile(prefix: list[str], job: dict, folder: Path, timeout_s: float) -> dict:
    """Run the child under `prefix` (in the calling worker's sandbox): {"ncu_csv": text} when
    ncu reported kernels, else {"ncu_error": why} (no counters on this host, a timeout...)."""
    job_file = folder / "nsight-job.json"
    package_root = str(Path(__file__).resolve().parents[3])   # above kforge_nb/evaluator/worker/
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
    try:
        job_file.write_text(json.dumps(job))
        done = subprocess.run([*prefix, sys.executable, "-m", "kforge_nb.evaluator.worker.nsight",
                               str(job_file)], capture_output=True, text=True, env=env,
                              timeout=timeout_s, cwd=folder)
    except subprocess.TimeoutExpired:
        return {"ncu_error": f"ncu took over {timeout_s:.0f} s"}
    except OSError as err:
        return {"ncu_error": f"ncu could not run: {err}"}
    if parse_csv(done.stdout):
        return {"ncu_csv": done.stdout[-200_000:]}
    said = [line for line in (done.stdout + done.stderr).splitlines()
            if "ERR" in line or "rror" in line]
    return {"ncu_error": (said[-1] if said else f"no kernels profiled (exit {done.returncode})"
                          )[:300]}


def run_once(job: dict) -> None:
    """The child: the candidate rebuilt as judged, warmed, one forward profiled."""
    import torch

    from . import common, harness
    common.start(job)
    device = job["device"]
    problem = common.load_problem(job)
    module = harness.load_module(job["source"], job["filename"], "kforge_candidate")
    cls = getattr(module, "ModelNew", None) or getattr(module, "NewModel")
    model = common.build(cls, problem, job, device)
    common.load_weights(model, harness.torch_load(job["weights"], weights_only=True), device)
    inputs = harness.trial_inputs(problem, job["trial"], device)
    cuda = device.startswith("cuda")
    with torch.no_grad():
        for _ in range(2):                          # compile, autotune, warm
            model(*inputs)
        harness.synchronize(device)
        if cuda:
            torch.cuda.profiler.start()
        model(*inputs)
        harness.synchronize(device)
        if cuda:
            torch.cuda.profiler.stop()
    print("kforge-nsight: profiled one forward", flush=True)


if __name__ == "__main__":
    run_once(json.loads(Path(sys.argv[1]).read_text()))
