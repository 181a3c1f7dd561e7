"""What the agents are told about a verdict: error feedback and the compact profile summary.

The analysis agent never sees a raw trace: it gets `profile_summary()` — top kernels and their
time shares, launches per call, achieved bandwidth and FLOP rate against the device's peaks.
"""
from __future__ import annotations

import re
import statistics
from collections import defaultdict

from ..baselines import long_name, short_name
from ..evaluator.worker.nsight import METRICS as NCU_METRICS, parse_csv as parse_ncu_csv
from ..intervals import CEILING_NOTE, own_ms, speedup_text
from ..result import CORRECT, Result, measures_line

PROFILED_CALLS = 1   # the evaluator profiles one call (on inputs no memo has seen)


def describe_result(result: Result) -> str:
    """The verdict as a person (or a model) fixing the code needs it."""
    lines = [f"State: {result.state}", f"Message: {result.message}"]
    err = result.error or {}
    if err.get("line"):
        lines.append(f"Failing line {err['line']}: {err.get('source_line', '').strip()}")
    if err.get("log"):
        lines += ["Compiler output (end):", err["log"].strip()[-2500:]]
    elif err.get("traceback"):
        lines += ["Traceback (end):", err["traceback"].strip()[-2500:]]
    c = result.correctness
    if result.state == "mismatch" and c.max_abs_error is not None:
        lines.append(f"Output {c.shape} {c.dtype}: max abs error {c.max_abs_error:.3g}, max rel "
                     f"error {c.max_rel_error:.3g}, {c.mismatch_fraction:.2%} of values wrong"
                     f"{'; failed on ' + c.failed_check if c.failed_check else ''}")
        for w in c.worst[:3]:
            lines.append(f"  at {w['index']}: got {w['got']:.6g}, expected {w['expected']:.6g}")
    if result.rules:
        lines.append("Rules that fired: " + ", ".join(result.rules))
    if result.state == CORRECT:
        lines.append(summary_text(profile_summary(result)))
        if result.measures:                    # the user's own hook (--measure)
            lines.append(measures_line(result.measures))
    return "\n".join(lines)


# names in a profile that are torch/vendor ops rather than generated kernels ("cpu::..." are ours)
VENDOR = re.compile(r"^(?!cpu::).*(aten::|mkldnn|onednn|mkl|conv|addmm|linear|matmul|bmm|\bmm\b|"
                    r"gemm|cublas|cutlass|xmma|sm\d+_)", re.I)


def vendor_time_share(summary: dict) -> float:
    """The share of the candidate's profiled time spent in torch's own (vendor) ops."""
    return sum(k.get("share", 0) for k in summary.get("top_kernels") or []
               if VENDOR.search(k.get("name", "")))


def why_slower_than_eager(s: dict) -> str:
    """One sentence, from a profile summary: why a candidate does not beat eager."""
    eager_ms, size, vendor = s.get("eager_ms"), s.get("min_bytes"), vendor_time_share(s)
    fraction, ms = s.get("fraction_of_sol"), s.get("candidate_ms")
    if vendor > 0.5:
        return (f"{vendor:.0%} of the time is in torch's own GEMM or convolution, which stays; "
                "the fused part is too small to make up for the extra launch")
    if eager_ms is not None and eager_ms < 0.05:
        work = f"{size / 1024:.0f} KB of data" if size else "little work"
        return (f"{work} per call and eager takes {eager_ms * 1e3:.0f} us: call overhead "
                "(the Python launcher, waking threads) dominates")
    sol_ms = fraction * ms if fraction and ms else None
    if sol_ms and eager_ms and sol_ms / eager_ms > 1.0:
        return (f"eager already runs faster than this machine's estimated speed of light "
                f"({sol_ms / eager_ms:.0%} of it: the estimate is low, as for vendor GEMMs on "
                "a CPU): there is little left to win")
    if sol_ms and eager_ms and sol_ms / eager_ms > 0.6:
        return (f"eager already runs at {sol_ms / eager_ms:.0%} of the speed of light here: "
                "there is little left to fuse away")
    reached = f"{fraction:.0%}" if fraction is not None else "an unknown share"
    return (f"the kernel reaches {reached} of the speed of light and no strategy the builtin "
            "agent knows closed the gap")


def profile_summary(result: Result) -> dict:
    t, r = result.timing, result.roofline
    events = (result.profile or {}).get("candidate_events", [])
    by_name: dict[str, float] = defaultdict(float)
    for e in events:
        by_name[e["name"]] += e["duration_us"]
    total = sum(by_name.values()) or 1.0
    top = sorted(by_name.items(), key=lambda kv: -kv[1])[:5]
    # the time the verdict leads with (on a busy CPU its own time), the one the roofline's
    # fraction was computed at (evaluator/parent/figures.py): time, fraction and achieved
    # rates agree
    ms = own_ms(t)
    return {
        "device": r.device or t.device, "timing_real": t.real, "timing_note": t.note,
        "candidate_ms": ms, "eager_ms": t.eager_ms, "compile_ms": t.compile_ms,
        "speedup_vs_eager": t.speedup_vs_eager, "speedup_vs_compile": t.speedup_vs_compile,
        "compile_mode": t.compile_mode,
        "speedup_vs_eager_ci": t.speedup_vs_eager_ci,
        "speedup_vs_compile_ci": t.speedup_vs_compile_ci,
        "noisy": t.noisy, "noise_note": t.noise_note, "busy": t.busy, "busy_note": t.busy_note,
        "ceiling_exceeded": r.ceiling_exceeded,
        "launches": round(len(events) / PROFILED_CALLS, 1) if events else None,
        "top_kernels": [{"name": n, "share": round(d / total, 3)} for n, d in top],
        "flops": r.flops, "min_bytes": r.min_bytes, "bound": r.bound,
        "fraction_of_sol": r.fraction_of_sol,
        "achieved_bandwidth": r.min_bytes / (ms * 1e-3) if (r.min_bytes and ms) else None,
        "peak_bandwidth": r.peak_bandwidth,
        "achieved_flops": r.flops / (ms * 1e-3) if (r.flops and ms) else None,
        "peak_flops": r.peak_flops,
        **({"ncu": kernels_by_name(parse_ncu_csv(result.profile["ncu_csv"]))}
           if (result.profile or {}).get("ncu_csv") else {}),
        **({"ncu_error": result.profile["ncu_error"]}
           if (result.profile or {}).get("ncu_error") else {}),
        # where the profiled call and the timed median differ (evaluator/parent/figures.py)
        **({"profile_note": result.profile["note"]}
           if (result.profile or {}).get("note") else {}),
    }


def kernels_by_name(kernels: list[dict]) -> list[dict]:
    """ncu's rows (one per launch) as one per kernel: its launches and mean metrics."""
    named: dict[str, list[dict]] = defaultdict(list)
    for k in kernels:
        named[k["name"]].append(k)
    merged = []
    for name, launches in named.items():
        means = {m: statistics.fmean(values) for m in NCU_METRICS
                 if (values := [k[m] for k in launches if k.get(m) is not None])}
        merged.append({"name": name, "launches": len(launches), **means})
    return merged


def summary_text(s: dict) -> str:
    def num(v, unit="", scale=1.0):
        return "n/a" if v is None else f"{v / scale:.3g}{unit}"
    def speedup(key):
        value = s.get(key)
        return "n/a" if value is None else speedup_text(value, s.get(f"{key}_ci"))
    lines = [f"Time: candidate {num(s.get('candidate_ms'), ' ms')}, eager "
             f"{num(s.get('eager_ms'), ' ms')}, {long_name(s.get('compile_mode'))} "
             f"{num(s.get('compile_ms'), ' ms')} (speedup {speedup('speedup_vs_eager')} vs "
             f"eager, {speedup('speedup_vs_compile')} vs {short_name(s.get('compile_mode'))}"
             + ("; ± half the 95 % interval of the paired ratios" if s.get("speedup_vs_eager_ci")
                else "") + ")"]
    if not s.get("timing_real", True):
        lines.append(f"NOTE: {s.get('timing_note')}")
    # Whether a timing was noisy or the machine busy is left out of the analyst's prompt: the
    # interval's width above says how far to trust the speedup, the views carry the notes, and
    # a line present in one run but not the next would break the replay of a recorded run
    # (providers/recording.py masks measurements, not sentences).
    fraction = s.get("fraction_of_sol")
    if fraction is not None and (fraction > 1 or s.get("ceiling_exceeded")):
        where = (f"above 100 % of speed of light: {CEILING_NOTE} (the measured peak is too "
                 "low; read the fraction as unknown, not as headroom used up)")
    else:
        where = f"{num(fraction and fraction * 100, '%')} of speed of light"
    lines.append(f"Roofline: {s.get('bound') or 'unknown'}-bound, "
                 f"{where}; bandwidth {num(s.get('achieved_bandwidth'), ' GB/s', 1e9)} of "
                 f"{num(s.get('peak_bandwidth'), ' GB/s', 1e9)}; compute "
                 f"{num(s.get('achieved_flops'), ' GFLOP/s', 1e9)} of "
                 f"{num(s.get('peak_flops'), ' GFLOP/s', 1e9)}")
    if s.get("launches") is not None:
        lines.append(f"Launches per forward: {s['launches']}")
    if s.get("profile_note"):
        # a measurement decides whether it is said: a replay leaves the line out (recording.py)
        lines.append(f"Profile note: {s['profile_note']}")
    if s.get("top_kernels"):
        lines.append("Top kernels (share of the candidate's time):")
        lines += [f"  - {k['name']} {k['share']:.0%}" for k in s["top_kernels"]]
    if s.get("ncu"):
        lines.append("Nsight Compute, per kernel:")
        lines += [f"  - {k['name']}" + (f" ({k['launches']} launches)" if k["launches"] > 1
                                        else "") + ": " + ", ".join(
            shown.format(k[metric]) for metric, shown in NCU_METRICS.items()
            if k.get(metric) is not None) for k in s["ncu"]]
    elif s.get("ncu_error"):
        lines.append(f"Nsight Compute: no counters ({s['ncu_error']})")
    return "\n".join(lines)


