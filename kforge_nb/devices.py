"""Device ceilings: the one place for peak bandwidth and FLOP rates, and the roofline they give.

Two kinds of ceiling, never confused:
- *guaranteed* peaks (`guaranteed_peaks`): what the hardware cannot exceed whatever the load,
  from the ISA and the clock (CPU: cores x max clock x vector lanes x FMA units x 2; the L1's
  accesses a cycle for bytes) or the datasheet (GPU). Only these may refuse a time
  (evaluator/parent/physics.py, rule `faster-than-hardware`), and only on bytes an answer must
  write.
- *measured* ceilings (`peaks`): GPU figures measured on the machines this project is tested on
  (a large device-to-device copy counting bytes read + written; a large GEMM); the CPU's
  bandwidths measured once per machine by a short probe and cached. They draw the roofline and
  may be beaten (Roofline.ceiling_exceeded: a flag, never a verdict). On the CPU the roofline's
  compute ceiling is the larger of the guaranteed ISA peak and the measured GEMM, so that an
  honest FMA loop never draws above 100 % (a GEMM probed under load read 114 GFLOP/s on a box
  whose FMA loop reaches 539).
"""
from __future__ import annotations

import functools
import json
import math
import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .options import DEFAULT_PRECISION
from .result import Roofline

# name fragment -> (bytes/s, {dtype: FLOP/s}); measured on the lent H100/H200 (2026-11)
GPU_PEAKS = {
    "H200": (4.2e12, {"float32": 50.7e12, "tf32": 400e12, "bfloat16": 750e12, "float16": 750e12}),
    "H100": (3.0e12, {"float32": 50.7e12, "tf32": 400e12, "bfloat16": 790e12, "float16": 790e12}),
}

# --- guaranteed peaks: what no kernel can beat, whatever the load ------------------------------
# GPU, from the datasheets (SXM parts, the higher figure with 2:4 sparsity, so that no dense
# kernel exceeds it): name fragment -> (SMs, max boost clock Hz, {dtype: FLOP/s})
GPU_DATASHEET = {
    "H200": (132, 1.98e9, {"float64": 67e12, "float32": 67e12, "tf32": 989e12,
                           "bfloat16": 1979e12, "float16": 1979e12}),
    "H100": (132, 1.98e9, {"float64": 67e12, "float32": 67e12, "tf32": 989e12,
                           "bfloat16": 1979e12, "float16": 1979e12}),
}
# a GPU's stores go through its L1 (write-through) to the L2, which may hold them past the call's
# end: an output is written no faster than SMs x clock x 128 B a cycle (Hopper's SM-to-L2 path
# is 64 B a cycle: twice that, generous); an unknown GPU's clock is taken as 3 GHz
GPU_STORE_BYTES_PER_CYCLE = 128
GPU_FALLBACK_CLOCK_HZ = 3.0e9
# no max clock published (VMs have no cpufreq; /proc/cpuinfo's "cpu MHz" is the current clock and
# the model name's "@ 2.50GHz" the base one, both passed by turbo: this project's 2.5 GHz Xeon
# ran an FMA loop at 539 GFLOP/s, 4.2 GHz x 128 FLOP a cycle): above any shipped core's turbo
# (i9-14900KS, 6.2 GHz)
CPU_FALLBACK_CLOCK_HZ = 6.5e9
# L1 accesses a core makes a cycle, at most: 3 loads + 2 stores of one vector each (Golden Cove,
# Apple's Firestorm; Skylake-X to Ice Lake do 2 + 1 with 64-byte AVX-512 vectors)
L1_ACCESSES_PER_CYCLE = 5


@dataclass(frozen=True)
class Guaranteed:
    """Peaks the hardware cannot exceed, each with the formula that gives it (said in full in a
    refusal). None / {} where nothing is known: then nothing is refused."""
    device: str
    bandwidth: float | None = None            # bytes/s, data in the nearest cache
    bandwidth_formula: str = ""
    flops: dict = field(default_factory=dict)  # dtype -> FLOP/s
    flops_formula: str = ""


def vector_shape(isa: tuple[str, ...], arch: str) -> tuple[int, int, str]:
    """(vector bytes, FMA vector units a core, which ISA) of the widest vectors the flags name:
    AVX-512 64 B (16 fp32 lanes), AVX/AVX2 32 B (8), SSE 16 B (4), with 2 FMA units on x86;
    NEON 16 B (4 lanes) and SVE (its length read nowhere reliable: 64 B, the widest shipped) with
    4 units (Neoverse V1/V2, Apple's cores: four 128-bit FMA pipes). Nothing known: 64 B x 4."""
    flags = set(isa)
    if "avx512f" in flags:
        return 64, 2, "AVX-512"
    if flags & {"avx2", "avx"}:
        return 32, 2, "AVX2" if "avx2" in flags else "AVX"
    if "sve" in flags or "sve2" in flags:
        return 64, 4, "SVE"
    if "neon" in flags or arch in ("aarch64", "arm64"):
        return 16, 4, "NEON"
    if arch in ("x86_64", "amd64", "i686", "i386") or "sse4_2" in flags:
        return 16, 2, "SSE"
    return 64, 4, "an unknown ISA (taken at its widest)"


def cpu_guaranteed(cores: int, clock_hz: float, isa: tuple[str, ...], arch: str = "x86_64",
                   clock_source: str = "") -> Guaranteed:
    """The CPU's guaranteed peaks, a pure function of what the machine says:
    FLOP/s = cores x max clock x fp32 lanes x FMA units x 2 (fp64: half the lanes; bf16/fp16:
    AMX's 1024 multiply-adds a cycle where amx_tile is present, twice the fp32 lanes where
    avx512_bf16/avx512_fp16 is, else the fp32 rate);
    bytes/s = cores x max clock x L1_ACCESSES_PER_CYCLE x vector bytes (data in the L1)."""
    width, units, name = vector_shape(isa, arch)
    lanes = width // 4
    per_core = clock_hz * units * 2
    fp32 = cores * per_core * lanes
    half = fp32
    if "amx_tile" in isa:
        half = cores * clock_hz * 1024 * 2
    elif {"avx512_bf16", "avx512_fp16"} & set(isa):
        half = 2 * fp32
    clock = f"{clock_hz / 1e9:.3g} GHz max clock" + (f" ({clock_source})" if clock_source else "")
    bandwidth = cores * clock_hz * L1_ACCESSES_PER_CYCLE * width
    return Guaranteed(
        device=f"CPU ({cores} logical cores, {name})",
        bandwidth=bandwidth,
        bandwidth_formula=(f"{cores} cores x {clock} x {L1_ACCESSES_PER_CYCLE} L1 accesses a "
                           f"cycle (3 loads + 2 stores, the most any core makes) x {width} B "
                           f"{name} vectors = {bandwidth / 1e9:.4g} GB/s"),
        flops={"float32": fp32, "float64": fp32 / 2, "bfloat16": half, "float16": half},
        flops_formula=(f"{cores} cores x {clock} x {lanes} fp32 lanes ({name}) x {units} FMA "
                       f"units x 2 FLOP = {fp32 / 1e9:.4g} GFLOP/s"))


def max_clock_hz() -> tuple[float, str]:
    """(Hz, where it was read) of the fastest core (`published_max_clock`), else
    CPU_FALLBACK_CLOCK_HZ (see there why not /proc/cpuinfo's figures)."""
    return published_max_clock() or \
        (CPU_FALLBACK_CLOCK_HZ, "no max clock published here: a bound above any shipped turbo")


@functools.lru_cache(maxsize=1)
def published_max_clock() -> tuple[float, str] | None:
    """(Hz, where it was read) of the fastest core where the system publishes it: cpufreq's
    cpuinfo_max_freq, else lscpu's "CPU max MHz"; None where neither does (most VMs). The
    prompt's machine section says it too (machine.py)."""
    found = []
    for path in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/cpuinfo_max_freq"):
        try:
            found.append(int(path.read_text().strip()) * 1e3)      # kHz
        except (OSError, ValueError):
            continue
    if found and max(found) > 0:
        return max(found), "cpufreq cpuinfo_max_freq"
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10,
                              env={**os.environ, "LC_ALL": "C"}).stdout
    except (OSError, subprocess.SubprocessError):
        text = ""
    match = re.search(r"^CPU max MHz:\s*([0-9.]+)", text, re.MULTILINE)
    if match and float(match.group(1)) > 0:
        return float(match.group(1)) * 1e6, "lscpu CPU max MHz"
    return None


def gpu_guaranteed(name: str, sms: int | None = None) -> Guaranteed:
    """The GPU's guaranteed peaks: the datasheet's FLOP rates, and the bytes an output can be
    written at (SMs x max clock x GPU_STORE_BYTES_PER_CYCLE)."""
    for key, (table_sms, clock, flops) in GPU_DATASHEET.items():
        if key in name:
            sms, known = max(sms or 0, table_sms), clock
            break
    else:
        flops, known = {}, None
    if not sms:
        return Guaranteed(name or "cuda", flops=flops)
    clock = known or GPU_FALLBACK_CLOCK_HZ
    bandwidth = sms * clock * GPU_STORE_BYTES_PER_CYCLE
    return Guaranteed(
        device=name or "cuda", bandwidth=bandwidth, flops=flops,
        bandwidth_formula=(f"{sms} SMs x {clock / 1e9:.3g} GHz "
                           f"{'max boost clock' if known else '(a bound above any GPU clock)'} x "
                           f"{GPU_STORE_BYTES_PER_CYCLE} B a cycle to the L2 = "
                           f"{bandwidth / 1e12:.4g} TB/s"),
        flops_formula="datasheet peaks (with sparsity)" if flops else "")


@functools.lru_cache(maxsize=4)
def guaranteed_peaks(device: str) -> Guaranteed:
    """This machine's guaranteed peaks for 'cpu' or 'cuda' (read once per process). The CPU's
    cores are all the logical CPUs the system has (more than any process may use: generous)."""
    if device == "cpu":
        from .machine import describe
        machine = describe()
        clock, source = max_clock_hz()
        return cpu_guaranteed(max(machine.logical, machine.cores), clock, machine.isa,
                              machine.arch, source)
    if device == "cuda":
        try:
            import torch
            sms = torch.cuda.get_device_properties(0).multi_processor_count \
                if torch.cuda.is_available() else None
        except Exception:
            sms = None
        return gpu_guaranteed(gpu_name() if sms else "", sms)
    return Guaranteed(device)


REPROBE_S = 600.0


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
    """Bandwidth (DRAM and in-cache) and fp32 FLOP rate of this CPU, measured once (a few
    seconds) and cached: all the threads this process may use, the best of a copy and a
    STREAM-like triad (a = b + s*c, one pass: three arrays' bytes), in-cache at several sizes
    (L1 to L2), and the GEMM of the BLAS torch ships (its widest FMA) at two sizes. Measured,
    so an honest kernel may beat them (under load above all): the roofline then says "ceiling
    underestimated" (Roofline.ceiling_exceeded), never a fraction drawn as fact, and no verdict
    rests on them (the roofline's compute ceiling is the larger of this GEMM and the ISA's
    guaranteed peak)."""
    from .runtime.native import cache_dir
    from .evaluator.parent import clocks
    path = cache_dir() / "cpu_peaks.v3.json"
    cached, age_s = cached_peaks(path)
    # a probe that shared the CPU reads low: probed again (at most every 10 minutes) until
    # one runs on an idle machine, each figure the best seen
    if cached and (not cached["busy"] or age_s < REPROBE_S):
        return cached
    import torch
    began, machine = time.monotonic(), clocks.machine_cpu_s()
    own = clocks.process_cpu_s([os.getpid()])
    threads = torch.get_num_threads()
    cores = usable_cores()
    torch.set_num_threads(max(threads, cores))
    try:
        bandwidth = max(copy_rate(64 * 2**20), triad_rate(64 * 2**20))
        cache_bandwidth = max(max(copy_rate(n, inner=200), triad_rate(n, inner=200))
                              for n in (16 * 2**10, 128 * 2**10, 512 * 2**10))
        flops = max(gemm_rate(1024), gemm_rate(2048, repeats=3))
    finally:
        torch.set_num_threads(threads)
    others = None
    if machine is not None:
        others = ((clocks.machine_cpu_s() - machine) - (clocks.process_cpu_s([os.getpid()]) - own)
                  ) / max(time.monotonic() - began, 1e-3)
    result = {"name": f"CPU ({cores} cores, {max(threads, cores)} threads)",
              "bandwidth": bandwidth, "cache_bandwidth": max(cache_bandwidth, bandwidth),
              "llc_bytes": last_level_cache_bytes(), "float32": flops,
              "busy": others is not None and others >= 0.5}
    for key in ("bandwidth", "cache_bandwidth", "float32"):
        result[key] = max(result[key], cached.get(key) or 0)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, path)
    return result


PEAK_FIGURES = ("bandwidth", "cache_bandwidth", "llc_bytes", "float32")


def cached_peaks(path: Path) -> tuple[dict, float]:
    """The probe cached at `path` and its age in seconds; ({}, inf) where there is none fit to
    use. Read through safe_open: a candidate run with --no-sandbox can reach the shared
    cache, and a FIFO there would block every later evaluation's read, a link would be
    followed; what is there is checked to be the probe's shape (a number for each figure)."""
    from .evaluator.sandbox import safe_open
    try:
        fd = safe_open.open_regular(path)
    except OSError:
        return {}, math.inf
    with os.fdopen(fd, "rb") as f:
        age_s = time.time() - os.fstat(fd).st_mtime
        text = f.read(1 << 12)
    try:
        cached = json.loads(text)
    except ValueError:
        return {}, math.inf
    fit = isinstance(cached, dict) and isinstance(cached.get("name"), str) and \
        isinstance(cached.get("busy"), bool) and all(
            isinstance(cached.get(key), (int, float)) and not isinstance(cached.get(key), bool)
            and math.isfinite(cached[key]) and cached[key] > 0 for key in PEAK_FIGURES)
    return (cached, age_s) if fit else ({}, math.inf)


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def copy_rate(nbytes: int, inner: int = 1) -> float:
    """Bytes/s of dst.copy_(src) over `nbytes` arrays (read + write counted)."""
    import torch
    src = torch.randn(nbytes // 4)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    seconds = best_of(lambda: [dst.copy_(src) for _ in range(inner)]) / inner
    return 2 * nbytes / seconds


def triad_rate(nbytes: int, inner: int = 1) -> float:
    """Bytes/s of a = b + 3c over `nbytes` arrays, one pass (two reads and a write)."""
    import torch
    b, c = torch.randn(nbytes // 4), torch.randn(nbytes // 4)
    a = torch.empty_like(b)
    for _ in range(3):
        torch.add(b, c, alpha=3.0, out=a)
    seconds = best_of(lambda: [torch.add(b, c, alpha=3.0, out=a) for _ in range(inner)]) / inner
    return 3 * nbytes / seconds


def gemm_rate(n: int, repeats: int = 7) -> float:
    import torch
    a, b = torch.randn(n, n), torch.randn(n, n)
    out = torch.empty(n, n)
    torch.mm(a, b, out=out)
    return 2 * n**3 / best_of(lambda: torch.mm(a, b, out=out), repeats)


def best_of(fn, repeats: int = 7) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def roofline(flops: int | None, min_bytes: int | None, dtype: str, device: str,
             measured_ms: float | None, precision: str = DEFAULT_PRECISION) -> Roofline:
    """Speed-of-light time = max(FLOPs / peak rate, bytes / peak bandwidth). A display, never a
    verdict: the reference's FLOPs and bytes are not the least any algorithm needs, and the
    measured ceilings may be low (evaluator/parent/physics.py decides `faster-than-hardware`)."""
    name, bandwidth, rates = peaks(device, min_bytes)
    rate_key = {"tf32": "tf32", "bf16": "bfloat16", "fp16": "float16"}.get(precision, dtype)
    rate = rates.get(rate_key) or rates.get(dtype)
    flops_source = "measured" if rate else ""
    if device == "cpu":
        # a GEMM probed under load reads low: the ISA's peak, where it is higher, so an honest
        # FMA loop never draws above 100 % (the measured memory ceilings stay: beaten, flagged)
        sure = guaranteed_peaks("cpu").flops
        sure_rate = sure.get(rate_key) or sure.get(dtype)
        if sure_rate and (not rate or sure_rate >= rate):
            rate, flops_source = sure_rate, "guaranteed"
    out = Roofline(flops=flops, min_bytes=min_bytes, device=name, peak_flops=rate,
                   peak_bandwidth=bandwidth, peak_flops_source=flops_source,
                   peak_bandwidth_source="measured" if bandwidth else "")
    terms = {}
    if flops and rate:
        terms["compute"] = flops / rate
    if min_bytes and bandwidth:
        terms["memory"] = min_bytes / bandwidth
    if terms:
        out.bound = max(terms, key=terms.get)
        out.speed_of_light_ms = terms[out.bound] * 1e3
        if measured_ms:
            # as measured, above 1 too: the views cap the bar and say the ceiling is low
            out.fraction_of_sol = out.speed_of_light_ms / measured_ms
            out.ceiling_exceeded = out.fraction_of_sol > 1.0
    return out

