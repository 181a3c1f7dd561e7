"""The loop-under-load benchmark's k-pass kernel against eager `x * 2` in one bare process: no
evaluator, no sandbox, no second worker. Tells what the kernel itself costs from what the
evaluator's way of timing could add (docs/loop-under-load-2026-11-27.md).

    OMP_WAIT_POLICY=PASSIVE python benchmarks/bare_speedup.py --passes 1 --rounds 40

Alternating blocks of `--calls` calls each, inputs rotated over 6 sets of `--size` floats as
the evaluator rotates its timing sets; each block's time is its p20 call; the speedup of a
round is eager's block over the kernel's. Kernel code runs in this process: benchmark only.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import types
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loop_under_load import kernel  # noqa: E402


def block(fn, sets: list, calls: int) -> float:
    """The p20 of `calls` calls in ms, inputs rotated."""
    times = []
    for k in range(calls):
        x = sets[k % len(sets)]
        start = time.perf_counter_ns()
        fn(x)
        times.append(time.perf_counter_ns() - start)
    times.sort()
    return times[len(times) // 5] / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passes", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--size", type=int, default=1 << 20, help="floats in y = 2x")
    args = parser.parse_args()
    module = types.ModuleType("candidate")
    exec(compile(kernel(args.passes, "bare"), "candidate.py", "exec"), module.__dict__)
    model = module.ModelNew()
    sets = [torch.randn(args.size) for _ in range(6)]
    eager, kernel_ms, speedups = [], [], []
    for _ in range(args.rounds):
        eager.append(block(lambda x: x * 2, sets, args.calls))
        kernel_ms.append(block(model, sets, args.calls))
        speedups.append(eager[-1] / kernel_ms[-1])
    q1, _, q3 = statistics.quantiles(speedups, n=4)
    print(f"threads {torch.get_num_threads()}, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '')!r}")
    print("| passes | eager p20 ms | kernel p20 ms | speedup (median) | quartiles |")
    print("|---|---|---|---|---|")
    print(f"| {args.passes} | {statistics.median(eager):.4f} | {statistics.median(kernel_ms):.4f} "
          f"| {statistics.median(speedups):.3f}x | {q1:.3f}-{q3:.3f} |")


if __name__ == "__main__":
    main()
