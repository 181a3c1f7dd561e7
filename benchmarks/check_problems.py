"""Check every problem in benchmarks/problems/: it loads, and its reference runs.

    python benchmarks/check_problems.py [--gpu-run] [NAME ...]

For each problem:
- kforge's own static check (`Problem.from_file`) passes;
- at the "cpu" size, `Model(*get_init_inputs())(*get_inputs())` runs on this CPU (eager time is
  printed; it should be milliseconds), and again at another batch size, as the evaluator's
  shape-check trial does;
- at the "gpu" size, the model and inputs are built on torch's `meta` device and the forward
  runs there: shapes, FLOPs and input bytes are checked without allocating or computing.
  With --gpu-run on a CUDA host, the "gpu" size also runs for real and its eager time is shown.

Exit status 0 when every problem passes.
"""
from __future__ import annotations

import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

from kforge_nb.problem import Problem

HERE = Path(__file__).parent / "problems"
SLOW_CPU_MS = 50.0


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"kforge_problem_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def outputs_of(value) -> list[torch.Tensor]:
    return [value] if isinstance(value, torch.Tensor) else [t for v in value for t in outputs_of(v)]


def with_batch(inputs: list, batch: int) -> list:
    """Like the evaluator's shape check: new leading size for inputs sharing the first's."""
    lead = next(x.shape[0] for x in inputs if isinstance(x, torch.Tensor) and x.dim())
    return [x.repeat(-(-batch // lead), *[1] * (x.dim() - 1))[:batch]
            if isinstance(x, torch.Tensor) and x.dim() and x.shape[0] == lead else x
            for x in inputs]


def check_cpu(module) -> dict:
    os.environ["KFORGE_SIZE"] = "cpu"
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs())
    inputs = module.get_inputs()
    with torch.no_grad():
        out = outputs_of(model(*inputs))
        for o in out:
            if not torch.isfinite(o.double()).all():
                raise ValueError("the reference output has non-finite values")
        times = []
        for _ in range(5):
            start = time.perf_counter()
            model(*inputs)
            times.append((time.perf_counter() - start) * 1e3)
        lead = inputs[0].shape[0]
        other = outputs_of(model(*with_batch(inputs, lead // 2 + 1 if lead >= 2 else 2)))
    return {"shape": list(out[0].shape), "ms": statistics.median(times),
            "other_batch_shape": list(other[0].shape)}


def check_gpu_shapes(module) -> dict:
    os.environ["KFORGE_SIZE"] = "gpu"
    try:
        with torch.device("meta"):
            model = module.Model(*module.get_init_inputs())
            inputs = module.get_inputs()
            with FlopCounterMode(display=False) as counter, torch.no_grad():
                out = outputs_of(model(*inputs))
    finally:
        os.environ["KFORGE_SIZE"] = "cpu"
    nbytes = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))
    return {"shape": list(out[0].shape), "gflop": counter.get_total_flops() / 1e9,
            "input_mb": nbytes / 2**20}


def run_gpu(module) -> float:
    """Eager milliseconds of the "gpu" size on the CUDA device (median of 5 after warm-up)."""
    os.environ["KFORGE_SIZE"] = "gpu"
    try:
        torch.manual_seed(0)
        with torch.device("cuda"):
            model = module.Model(*module.get_init_inputs())
            inputs = module.get_inputs()
        with torch.no_grad():
            model(*inputs)
            times = []
            for _ in range(5):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                model(*inputs)
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end))
        del model, inputs
        torch.cuda.empty_cache()
        return statistics.median(times)
    finally:
        os.environ["KFORGE_SIZE"] = "cpu"


def main(argv: list[str]) -> int:
    gpu_run = "--gpu-run" in argv
    argv = [a for a in argv if a != "--gpu-run"]
    if gpu_run and not torch.cuda.is_available():
        print("--gpu-run needs a CUDA GPU", file=sys.stderr)
        return 2
    paths = sorted(HERE.glob("*.py"))
    if argv:
        paths = [p for p in paths if p.stem in argv]
    failures = 0
    print(f"{'problem':<24} {'cpu output':<18} {'cpu ms':>7}  {'gpu output':<20} "
          f"{'gpu GFLOP':>9} {'gpu input MB':>12}" + (f" {'gpu eager ms':>12}" if gpu_run else ""))
    for path in paths:
        try:
            Problem.from_file(path)
            module = load(path)
            cpu = check_cpu(module)
            gpu = check_gpu_shapes(module)
            gpu_ms = f" {run_gpu(module):>12.3f}" if gpu_run else ""
        except Exception as exc:
            failures += 1
            print(f"{path.stem:<24} FAILED: {type(exc).__name__}: {exc}")
            continue
        slow = "  (slow for the cpu size)" if cpu["ms"] > SLOW_CPU_MS else ""
        print(f"{path.stem:<24} {str(tuple(cpu['shape'])):<18} {cpu['ms']:>7.2f}  "
              f"{str(tuple(gpu['shape'])):<20} {gpu['gflop']:>9.1f} {gpu['input_mb']:>12.0f}"
              f"{gpu_ms}{slow}")
    print(f"{len(paths) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
