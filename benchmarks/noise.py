"""How believable a judging is on this machine: one OpenMP kernel judged N times on an idle
machine and N times beside two busy loops (`python -c "while True: pass"`, started and killed
here), and a variant 1.3x slower judged beside it each time.

    python benchmarks/noise.py [--n 20] [--size 4194304] [--env OMP_WAIT_POLICY=PASSIVE ...]
                               [--cpus 0,1]

Prints, for idle and busy: how often the faster kernel is ranked first (its speedup above the
slower one's), how often a ranking by intervals calls the two "different" the right way and
the same kernel judged twice "different" (intervals that separate), how often the busy
interval holds the idle median, the spread of the speedups (p90/p10), and how often the
judging said busy/noisy. `--env` sets variables the workers inherit (OMP_*, GOMP_*): the
OpenMP experiments of issue 27. `--cpus` pins this script, its workers and its busy loops to
those CPUs: a 2-core machine on a larger host, several experiments side by side.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x)


def get_inputs():
    return [torch.randn({size})]


def get_init_inputs():
    return []
"""

KERNEL = r'''import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cmath>
#include <cstdint>

extern "C" void tanh_kernel(const float* x, float* y, int64_t n, int64_t extra) {
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
    // the slower variant: the same pass again over `extra` elements (its result rewritten)
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < extra; ++i) y[i] = std::tanh(x[i]);
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.tanh_kernel(x, y, x.numel(), int(x.numel() * EXTRA))
        return y
'''


def busy_loops(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
        p.wait()


BUDGET_S = 1.0


def judge(problem, extra: float, out: Path):
    from kforge_nb.evaluator import EvalOptions, evaluate
    source = KERNEL.replace("EXTRA", repr(extra))
    result = evaluate(problem, source, "cpp", EvalOptions(baselines=("eager",), out_dir=out,
                                                          trials=1, shape_check=False,
                                                          timing_budget_s=BUDGET_S))
    if result.state != "correct":
        raise SystemExit(f"the kernel was judged {result.state}: {result.message}")
    t = result.timing
    return {"speedup": t.speedup_vs_eager, "ci": t.speedup_vs_eager_ci or [t.speedup_vs_eager] * 2,
            "ms": t.candidate_ms, "busy": t.busy, "noisy": t.noisy, "rounds": t.rounds,
            "seconds": result.elapsed_s}


def separate(a: list[float], b: list[float]) -> bool:
    return a[0] > b[1] or b[0] > a[1]


def summary(name: str, fast: list[dict], slow: list[dict], again: list[dict],
            idle_median: float) -> str:
    n = len(fast)
    first = sum(f["speedup"] > s["speedup"] for f, s in zip(fast, slow)) / n
    called = sum(f["ci"][0] > s["ci"][1] for f, s in zip(fast, slow)) / n
    wrong = sum(s["ci"][0] > f["ci"][1] for f, s in zip(fast, slow)) / n
    twice = sum(separate(a["ci"], b["ci"]) for a, b in zip(fast, again)) / n
    holds = sum(f["ci"][0] <= idle_median <= f["ci"][1] for f in fast) / n
    speedups = sorted(f["speedup"] for f in fast)
    q = statistics.quantiles(speedups, n=10) if n >= 2 else [speedups[0]] * 9
    width = statistics.median((f["ci"][1] - f["ci"][0]) / 2 / f["speedup"] for f in fast)
    return (f"{name:5} | {first:6.0%} | {called:6.0%} | {wrong:5.0%} | {twice:6.0%} | "
            f"{holds:6.0%} | {statistics.median(speedups):6.2f}x | {q[-1] / q[0]:6.2f} | "
            f"±{width:4.0%} | {sum(f['busy'] for f in fast) / n:4.0%} | "
            f"{sum(f['noisy'] for f in fast) / n:5.0%} | "
            f"{statistics.median(f['rounds'] for f in fast):4.0f} | "
            f"{statistics.median(f['seconds'] for f in fast):5.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--size", type=int, default=1 << 22, help="elements of the tanh")
    parser.add_argument("--loops", type=int, default=2, help="busy loops beside the busy half")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the workers")
    parser.add_argument("--cpus", help="pin everything to these CPUs, e.g. 0,1")
    parser.add_argument("--json", help="also write every judging here (runs merged later)")
    parser.add_argument("--budget", type=float, default=1.0,
                        help="the timing budget in seconds (the rounds may go on 4x longer)")
    args = parser.parse_args()
    global BUDGET_S
    BUDGET_S = args.budget
    if args.cpus:                  # children (the fork server, the busy loops) inherit it
        os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})
    for item in args.env:          # before the fork server starts: the workers inherit it
        key, _, value = item.partition("=")
        os.environ[key] = value
    os.environ.setdefault("KFORGE_CACHE", tempfile.mkdtemp(prefix="kforge-noise-cache-"))
    from kforge_nb.problem import Problem
    problem = Problem.from_string(PROBLEM.replace("{size}", str(args.size)), name="tanh_noise")
    out = Path(tempfile.mkdtemp(prefix="kforge-noise-"))
    rows = {}
    for name in ("idle", "busy"):
        procs = busy_loops(args.loops) if name == "busy" else []
        try:
            time.sleep(0.5 if procs else 0)
            fast, slow, again = [], [], []
            for i in range(args.n):
                fast.append(judge(problem, 0.0, out))
                slow.append(judge(problem, 0.3, out))
                again.append(judge(problem, 0.0, out))
                print(f"{name} {i + 1}/{args.n}: {fast[-1]['speedup']:.3f}x {fast[-1]['ci']} "
                      f"| slower {slow[-1]['speedup']:.3f}x | again {again[-1]['speedup']:.3f}x"
                      f" busy={fast[-1]['busy']}", file=sys.stderr, flush=True)
        finally:
            stop(procs)
        rows[name] = (fast, slow, again)
    if args.json:
        Path(args.json).write_text(json.dumps({"env": args.env, "size": args.size,
                                               "rows": rows}))
    idle_median = statistics.median(f["speedup"] for f in rows["idle"][0])
    env = " ".join(args.env) or "(default OpenMP settings)"
    print(f"\ntanh over {args.size} floats, {args.n} judgings a side, {env}; busy = "
          f"{args.loops} busy loops on {len(os.sched_getaffinity(0))} cores; idle median "
          f"{idle_median:.3f}x")
    print("side  | faster | called | wrong | same≠ | holds  | median  | p90/10 | ±CI  | busy |"
          " noisy | rnds | s/judging")
    for name, (fast, slow, again) in rows.items():
        print(summary(name, fast, slow, again, idle_median))
    print("faster: the faster kernel's speedup above the 1.3x slower one's; called: their "
          "intervals separate the right way; wrong: separate the wrong way; same≠: the same "
          "kernel judged twice with separate intervals; holds: the interval holds the idle "
          "median")


if __name__ == "__main__":
    main()
