"""Device ceilings: the one place for peak bandwidth and FLOP rates, and the roofline they give.

GPU figures are *measured* ceilings on the machines this project is tested on (a large
device-to-device copy counting bytes read + written; a large GEMM), not datasheet numbers.
The CPU's ceilings are measured once per machine by a short probe and cached.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from .result import Roofline

# name fragment -> (bytes/s, {dtype: FLOP/s}); measured on the lent H100/H200 (2026-11)
GPU_PEAKS = {
    "H200": (4.2e12, {"float32": 50.7e12, "tf32": 400e12, "bfloat16": 750e12, "float16": 750e12}),
    "H100": (3.0e12, {"float32": 50.7e12, "tf32": 400e12, "bfloat16": 790e12, "float16": 790e12}),
}


def gpu_name() -> str:
    import torch
    return torch.cuda.get_device_name() if torch.cuda.is_available() else ""


def peaks(device: str, working_set: int | None = None) -> tuple[str, float | None, dict]:
    """(device label, bytes/s, FLOP/s by dtype) for 'cuda' or 'cpu'; None where unknown.

    GPU timings flush the L2 between calls, so DRAM bandwidth is the ceiling. CPU timings do
    not: a working set that fits in the last-level cache is held to the cache's bandwidth.
    """
    if device == "cuda":
        name = gpu_name()
        for key, (bandwidth, flops) in GPU_PEAKS.items():
            if key in name:
                return name, bandwidth, flops
        return name or "cuda", None, {}
    if device == "cpu":
        probe = cpu_peaks()
        in_cache = working_set is not None and working_set <= probe["llc_bytes"]
        bandwidth = probe["cache_bandwidth"] if in_cache else probe["bandwidth"]
        label = probe["name"] + (" (in cache)" if in_cache else "")
        return label, bandwidth, {"float32": probe["float32"]}
    return device, None, {}


def last_level_cache_bytes() -> int:
    sizes = []
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = path.read_text().strip()
        sizes.append(int(text[:-1]) * {"K": 2**10, "M": 2**20}.get(text[-1], 1)
                     if text[-1] in "KM" else int(text))
    return max(sizes, default=8 * 2**20)


def cpu_peaks() -> dict:
    """Copy bandwidth (DRAM and in-cache) and fp32 GEMM rate of this CPU, measured once (~1 s)
    and cached."""
    from .runtime.native import cache_dir
    path = cache_dir() / "cpu_peaks.v2.json"
    if path.exists():
        return json.loads(path.read_text())
    import torch
    src = torch.randn(64 * 2**20 // 4)
    dst = torch.empty_like(src)
    small_src, small_dst = torch.randn(256 * 2**10 // 4), torch.empty(256 * 2**10 // 4)
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    for _ in range(3):
        dst.copy_(src)
        small_dst.copy_(small_src)
        a @ b
    copy_s = best_of(lambda: dst.copy_(src))
    small_s = best_of(lambda: [small_dst.copy_(small_src) for _ in range(100)]) / 100
    gemm_s = best_of(lambda: a @ b)
    result = {"name": f"CPU ({os.cpu_count()} cores, {torch.get_num_threads()} threads)",
              "bandwidth": 2 * src.numel() * 4 / copy_s,
              "cache_bandwidth": 2 * small_src.numel() * 4 / small_s,
              "llc_bytes": last_level_cache_bytes(), "float32": 2 * 1024**3 / gemm_s}
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, path)
    return result


def best_of(fn, repeats: int = 7) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def roofline(flops: int | None, min_bytes: int | None, dtype: str, device: str,
             measured_ms: float | None, precision: str = "strict") -> Roofline:
    """Speed-of-light time = max(FLOPs / peak rate, bytes / peak bandwidth)."""
    name, bandwidth, rates = peaks(device, min_bytes)
    rate_key = {"tf32": "tf32", "bf16": "bfloat16", "fp16": "float16"}.get(precision, dtype)
    rate = rates.get(rate_key) or rates.get(dtype)
    out = Roofline(flops=flops, min_bytes=min_bytes, device=name, peak_flops=rate,
                   peak_bandwidth=bandwidth)
    terms = {}
    if flops and rate:
        terms["compute"] = flops / rate
    if min_bytes and bandwidth:
        terms["memory"] = min_bytes / bandwidth
    if terms:
        out.bound = max(terms, key=terms.get)
        out.speed_of_light_ms = terms[out.bound] * 1e3
        if measured_ms:
            out.fraction_of_sol = out.speed_of_light_ms / measured_ms
    return out

