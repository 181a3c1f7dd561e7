"""Prove the GPU paths: triton and cuda verdicts on a real GPU, Nsight Compute's counters in
the analyst's summary, and evaluation latency with and without them.

Run on a CUDA machine from the repo root:  PYTHONPATH=. python3 benchmarks/gpu_check.py [--json F]
Prints one table of verdicts, the counters of the correct ones, and a table of latencies
(median of 5).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("KFORGE_CACHE", tempfile.mkdtemp(prefix="kforge-cache-"))

from kforge_nb.agents.feedback import profile_summary, summary_text  # noqa: E402
from kforge_nb.evaluator import EvalOptions, evaluate  # noqa: E402
from kforge_nb.problem import Problem  # noqa: E402

EXAMPLES = ROOT / "kforge_nb" / "targets" / "examples"
SOFTMAX_GPU = (EXAMPLES / "softmax.py").read_text().replace(
    "torch.randn(64, 1000)", "torch.randn(8192, 4096)")
TRITON = (EXAMPLES / "triton_softmax.py").read_text()
CUDA = (EXAMPLES / "cuda_softmax.py").read_text()

# GPU-only exploit classes (tests/adversarial covers the rest on the CPU).
FORWARD = "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        x = x.contiguous()\n"
LAUNCH = "        softmax_kernel[(rows,)]"
MEMO_BY_ADDRESS = TRITON.replace(FORWARD, (
    "    memo = {}\n\n"
    "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
    "        key = (x.data_ptr(), tuple(x.shape))\n"
    "        if key in self.memo:\n"
    "            return self.memo[key]\n"
    "        x = x.contiguous()\n")).replace(
    "        return y\n", "        self.memo[key] = y\n        return y\n")
HIDDEN_SIDE_STREAM = TRITON.replace(LAUNCH, (
    "        side = getattr(torch.cuda, 'Str' + 'eam')()\n"
    "        side.wait_stream(torch.cuda.current_stream())\n"
    "        with getattr(torch.cuda, 'str' + 'eam')(side):\n"
    "            for _ in range(20):   # work the timed stream never waits for\n"
    "                softmax_kernel[(rows,)](x, y, n_cols, n_cols,\n"
    "                                        BLOCK_SIZE=triton.next_power_of_2(n_cols))\n"
    + LAUNCH))
GRAPH_REPLAY = TRITON.replace(FORWARD, (
    "    graph = None\n\n"
    "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
    "        if self.graph is not None:   # replays on the addresses captured the first time\n"
    "            self.graph.replay()\n"
    "            return self.y\n"
    "        self.x = x = x.contiguous()\n")).replace("        return y\n", (
    "        self.y = y\n"
    "        self.graph = torch.cuda.CUDAGraph()\n"
    "        with torch.cuda.graph(self.graph):\n"
    "            softmax_kernel[(rows,)](x, y, n_cols, n_cols,\n"
    "                                    BLOCK_SIZE=triton.next_power_of_2(n_cols))\n"
    "        return y\n"))

CASES = [
    ("triton example (softmax 8192x4096)", "triton", TRITON, "correct"),
    ("cuda example (softmax 8192x4096)", "cuda", CUDA, "correct"),
    ("triton: arange of 3 (compile error)", "triton",
     TRITON.replace("tl.arange(0, BLOCK_SIZE)", "tl.arange(0, 3)"), "compile_failure"),
    ("cuda: nvcc compile error", "cuda", CUDA.replace("float row_max =", "float row_max"),
     "compile_failure"),
    ("cuda: illegal address", "cuda",
     CUDA.replace("row_out[c] = expf", "row_out[c + (1ll << 40)] = expf"), "runtime_error"),
    ("triton: wrong scale (mismatch)", "triton",
     TRITON.replace("y = numerator / tl.sum", "y = 0.5 * numerator / tl.sum"), "mismatch"),
    ("cuda: unwritten tail (mismatch)", "cuda",
     CUDA.replace("c < cols; c += blockDim.x) row_out[c]", "c < cols - 1; c += blockDim.x) row_out[c]"),
     "mismatch"),
    ("triton: memo keyed on data_ptr", "triton", MEMO_BY_ADDRESS, "mismatch"),
    ("triton: work on a hidden side stream", "triton", HIDDEN_SIDE_STREAM, "correct"),
    ("triton: CUDA graph replayed on old addresses", "triton", GRAPH_REPLAY, "mismatch"),
]


def verdicts(problem: Problem, out: Path) -> list[dict]:
    rows = []
    for label, target, code, expected in CASES:
        options = EvalOptions(out_dir=out, timeout_s=300, ncu=True)
        r = evaluate(problem, code, target, options)
        t = r.timing
        rows.append({"case": label, "expected": expected, "state": r.state,
                     "ok": r.state == expected, "candidate_ms": t.candidate_ms,
                     "eager_ms": t.eager_ms, "compile_ms": t.compile_ms,
                     "speedup_vs_eager": t.speedup_vs_eager,
                     "speedup_vs_compile": t.speedup_vs_compile,
                     "fraction_of_sol": r.roofline.fraction_of_sol, "real": t.real,
                     "kernels": sorted({e["name"][:40] for e in
                                        r.profile.get("candidate_events", [])})[:3],
                     "message": r.message[:200], "note": t.note, "sandbox": r.sandbox,
                     "resources": r.resources, "elapsed_s": r.elapsed_s,
                     "ncu": counters(r)})
    return rows


def counters(r) -> dict:
    """What Nsight Compute added to the analyst's summary, and the seconds it took."""
    if r.state != "correct":
        return {}
    lines = summary_text(profile_summary(r)).splitlines()
    at = next((i for i, line in enumerate(lines) if line.startswith("Nsight")), len(lines))
    return {"lines": lines[at:], "seconds": r.resources.get("seconds", {}).get("nsight")}


def latency(problem: Problem, out: Path, target: str, code: str, n: int = 5,
            ncu: bool = True) -> dict:
    options = EvalOptions(baselines=("eager",), out_dir=out, ncu=ncu)
    cold, warm = [], []
    for i in range(n):
        unique = code + f"\n# cold build {time.time_ns()} {i}\n"
        t = time.perf_counter()
        assert evaluate(problem, unique, target, options).state == "correct"
        cold.append(time.perf_counter() - t)
        t = time.perf_counter()
        assert evaluate(problem, unique, target, options).state == "correct"
        warm.append(time.perf_counter() - t)
    return {"target": target + ("" if ncu else " --no-ncu"), "cold_s": statistics.median(cold),
            "warm_s": statistics.median(warm)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args = parser.parse_args()
    import torch
    import triton
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  "
          f"triton {triton.__version__}")
    out = Path(tempfile.mkdtemp(prefix="kforge-gpu-"))
    problem = Problem.from_string(SOFTMAX_GPU, name="softmax_gpu")
    t = time.perf_counter()
    rows = verdicts(problem, out)
    first = time.perf_counter() - t
    print(f"\n{'case':42} {'expected':16} {'state':16} {'cand ms':>9} {'eager ms':>9} "
          f"{'compile':>9} {'x eager':>8} {'x comp':>7} {'SoL':>6}")
    for r in rows:
        def f(v, fmt):
            return format(v, fmt) if v is not None else "-"
        print(f"{r['case']:42} {r['expected']:16} {r['state']:16} {f(r['candidate_ms'], '9.4f')} "
              f"{f(r['eager_ms'], '9.4f')} {f(r['compile_ms'], '9.4f')} "
              f"{f(r['speedup_vs_eager'], '8.2f')} {f(r['speedup_vs_compile'], '7.2f')} "
              f"{f(r['fraction_of_sol'], '6.1%')}")
        if not r["ok"]:
            print(f"    UNEXPECTED: {r['message']}")
        elif r["state"] != "correct" or r["note"]:
            print(f"    {(r['note'] or r['message'])[:160]}")
    print(f"sandbox on this host: {rows[0]['sandbox']}")
    print("\nNsight Compute in the analyst's summary (correct candidates):")
    for r in rows:
        if r["ncu"]:
            took = r["ncu"]["seconds"]
            print(f"  {r['case']}: " + (f"{took:.1f} s" if took is not None else "not run"))
            print("\n".join(f"    {line}" for line in r["ncu"]["lines"]) or "    (no lines)")
    print(f"(verdict table took {first:.1f} s including the reference and torch.compile baselines)")
    small = Problem.from_file(EXAMPLES / "softmax.py")
    lat = [latency(small, out, "triton", TRITON), latency(small, out, "cuda", CUDA),
           latency(small, out, "triton", TRITON, ncu=False),
           latency(small, out, "cuda", CUDA, ncu=False)]
    print(f"\n{'target':16} {'cold s':>8} {'warm s':>8}   (median of 5; cold = new source, "
          "warm = same source again)")
    for row in lat:
        print(f"{row['target']:16} {row['cold_s']:8.2f} {row['warm_s']:8.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"verdicts": rows, "latency": lat}, indent=2,
                                              default=str))


if __name__ == "__main__":
    main()
