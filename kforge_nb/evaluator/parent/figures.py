"""A timing's numbers into a verdict: medians and intervals of the paired ratios, the wall-clock
correction, the precision policy's figures, the cached torch.compile figure (a display, never a
ratio), the roofline, and the sentence where a profiled call and the timed median disagree."""
from __future__ import annotations

import hashlib
import json
import math
import os
import statistics
import time

from ... import artifacts, devices
from ...intervals import own_ms
from ...result import Result, Timing
from ...runtime.native import cache_dir
from . import stats
from ..sandbox import safe_open
from .options import EvalOptions

CACHE_ENTRY_BYTES = 4096   # a cached baseline's JSON: three numbers
PROFILE_GAP = 2.0        # a profiled call this many times off the timed median is said


def fill_timing(result: Result, paired: dict, speedup: float, rechecked: bool, note: str, *,
                options: EvalOptions, summary: dict, device: str, reference_source: str,
                policy: dict, compile_errors: dict[str, str]) -> None:
    """result.timing and result.roofline from the interleaved rounds (`paired`, see
    TimedRounds.interleave); `speedup` is the median ratio over eager, `note` a target's
    timing note (its timing is then no performance figure). `summary` is the judge's of the
    problem (its sizes, FLOPs, output dtypes), `policy` the reference's baseline under
    --precision (policy.py), `compile_errors` each torch.compile side that failed. The
    head-to-head is versus()."""
    times, ratios = paired["times"], paired["ratios"]
    median = statistics.median(times["candidate"])
    eager = statistics.median(times["judge"])
    q = statistics.quantiles(ratios["judge"], n=4) if len(ratios["judge"]) >= 4 \
        else [speedup] * 3
    wall = statistics.median(paired["walls"]) if paired["walls"] else None
    factor = 1.0        # what the wall clock changes in every speedup
    if wall and wall > 3 * median and wall - median > 0.05:
        note = (f"device events saw {median:.4g} ms but a wall-clock loop {wall:.4g} ms "
                "per call: work escapes the timed stream; the wall-clock figure is used")
        factor = median / wall
        speedup *= factor
        median = wall
    real = not note or note.startswith("device events")
    interval = lambda side: scaled(stats.median_interval(ratios[side]), factor)  # noqa: E731
    t = result.timing = Timing(
        real=real, note=note,
        device=devices.peaks(device)[0] if not note else device,
        candidate_ms=median, eager_ms=eager, candidate_spread=None,
        repeats=sum(paired["calls"][s] for s in ("judge", "candidate")) * len(
            ratios["judge"]),
        rechecked=rechecked, speedup_vs_eager=speedup,
        speedup_spread=(q[2] - q[0]) / speedup if speedup else None,
        rounds=len(ratios["judge"]),
        input_sets=len(options.timing_sets(summary.get("input_bytes", 0))))
    if real:
        t.speedup_vs_eager_ci = interval("judge")
        t.noise_note = stats.noise_sentence(ratios["judge"])
        t.noisy = bool(t.noise_note)
        if "compile" in ratios:
            t.compile_ms = statistics.median(times["compile"])
            t.speedup_vs_compile = statistics.median(ratios["compile"]) * factor
            t.speedup_vs_compile_ci = interval("compile")
    for side, error in compile_errors.items():
        under = f" under {policy.get('label')}" if side == "compile_policy" else ""
        t.note = (t.note + "; " if t.note else "") + \
            f"torch.compile{under} failed, so there is no figure beside it: {error}"
    if real:
        cached_baselines(t, eager, reference_source, device, options.compile_mode)
    if paired.get("cpu"):
        cpu = paired["cpu"]
        t.busy, t.busy_note = stats.busy_decision(
            cpu["load1"], cpu["cores"], cpu["others_cores"], cpu["worker_cpu_s"],
            cpu["wall_s"], cpu["preempted"])
    lows = paired.get("lows") or {}
    if lows.get("candidate"):
        t.candidate_low_ms = statistics.median(lows["candidate"])
    if t.busy and real and lows:
        busy_figures(t, lows, factor)
    if device == "cpu" and real:
        process_noise(t)
    fill_policy(t, paired, factor, policy)
    dtype = (summary.get("output_dtypes") or ["torch.float32"])[0].replace("torch.", "")
    # the fraction of the speed of light at the time the verdict leads with (own_ms: on a
    # busy CPU the candidate's own time, else the median), so the two never disagree
    result.roofline = devices.roofline(summary.get("flops"), summary.get("min_bytes"), dtype,
                                       device, own_ms(t) if t.real else None, options.precision)


def busy_figures(timing: Timing, lows: dict, factor: float) -> None:
    """On a contested CPU noise only adds time, and not to every side alike: a block's
    median carries the load, its low calls much less. The point is the median of the low
    calls' ratios, and the interval spans the rank intervals of both ratios (medians and
    low calls): as wide as the load made the data, never a floor of its own."""
    def low_ratios(side):
        return [x / c for x, c in zip(lows[side], lows["candidate"]) if c > 0]
    for side, name in (("judge", "eager"), ("compile", "compile")):
        if side not in lows or getattr(timing, f"speedup_vs_{name}") is None:
            continue
        ratios = low_ratios(side)
        if not ratios:
            continue
        point = statistics.median(ratios) * factor
        setattr(timing, f"speedup_vs_{name}", point)
        setattr(timing, f"speedup_vs_{name}_ci", stats.hull(
            getattr(timing, f"speedup_vs_{name}_ci"),
            scaled(stats.median_interval(ratios), factor), [point, point]))
    eager = lows.get("judge") or []
    if len(eager) >= 2 and min(eager) > 0:
        timing.busy_note += (f"; eager's own low calls ranged {min(eager):.4g}-"
                             f"{max(eager):.4g} ms across the rounds "
                             f"({max(eager) / min(eager):.1f}x)")


def process_noise(timing: Timing) -> None:
    """On the CPU each speedup's interval widened by what two processes running the same
    kernel differ by (stats.SELF_NOISE_FLOOR_CPU): a judging's rounds cannot see it, and
    the same kernel judged again lands anywhere inside it."""
    noise = stats.SELF_NOISE_FLOOR_CPU
    timing.speedup_vs_eager_ci = stats.widened(timing.speedup_vs_eager_ci, noise)
    timing.speedup_vs_compile_ci = stats.widened(timing.speedup_vs_compile_ci, noise)


def versus(paired: dict, options: EvalOptions, device: str, rival_void: str,
           rival_wrong: bool) -> dict | None:
    """The head-to-head with the rival (stats.head_to_head), with whom and the two times;
    {"id", "verdict": "void", "why"} where one was asked for and could not be had
    (`rival_void` says why; `rival_wrong`: its timed output was wrong)."""
    if not options.rival:
        return None
    lows = paired.get("lows") or {}
    floor = stats.SELF_NOISE_FLOOR_CPU if device == "cpu" else stats.SELF_NOISE_FLOOR
    duel = stats.head_to_head(lows.get("rival") or [], lows.get("candidate") or [], floor,
                              paired.get("low_q", stats.LOW_QUANTILE)) \
        if paired.get("rival") and not rival_void else None
    if duel is None:
        void = {"id": options.rival_id, "verdict": "void",
                "why": rival_void or "the rival was not timed"}
        return {**void, "rival_wrong": True} if rival_wrong else void
    return {"id": options.rival_id, **duel,
            "rival_ms": statistics.median(lows["rival"]),
            "candidate_ms": statistics.median(lows["candidate"])}


def fill_policy(timing: Timing, paired: dict, factor: float, policy: dict) -> None:
    """The figures under the precision policy, beside the fp32 ones: eager and
    torch.compile under it from the same interleaved rounds (medians of paired ratios)."""
    if not policy or not timing.real:
        return
    timing.policy = policy["label"]
    if policy.get("same_as_fp32"):       # tf32 on the CPU: the fp32 figures, said so
        timing.eager_policy_ms, timing.compile_policy_ms = timing.eager_ms, timing.compile_ms
        timing.speedup_vs_eager_policy = timing.speedup_vs_eager
        timing.speedup_vs_compile_policy = timing.speedup_vs_compile
        return
    ratios, times = paired["ratios"], paired["times"]
    if "policy" not in ratios:                # not timed on this device: the label says why
        return
    timing.eager_policy_ms = statistics.median(times["policy"])
    timing.speedup_vs_eager_policy = statistics.median(ratios["policy"]) * factor
    if "compile_policy" in ratios:
        timing.compile_policy_ms = statistics.median(times["compile_policy"])
        timing.speedup_vs_compile_policy = statistics.median(ratios["compile_policy"]) * factor


def cached_baselines(timing: Timing, eager_ms: float, reference_source: str, device: str,
                     compile_mode: str) -> None:
    """The torch.compile figure of an earlier evaluation of this problem on this device,
    kept in cache_dir()/baselines: a display with its age (compile_cached_ms,
    compile_cached_age_s), never in a ratio, and shown only where this evaluation has no
    figure of its own. This evaluation's figure, when it has one, replaces it."""
    import torch
    knobs = sorted((k, v) for k, v in os.environ.items() if k.startswith("KFORGE_")
                   and k != "KFORGE_CACHE")
    key = hashlib.sha256(json.dumps(["side-by-side", reference_source, device,
                                     torch.__version__, knobs, compile_mode,
                                     devices.gpu_name() if device == "cuda" else ""]
                                    ).encode()).hexdigest()[:20]
    path = cache_dir() / "baselines" / f"{key}.json"
    if timing.compile_ms is None:
        try:
            # through safe_open: a candidate run with --no-sandbox can reach the shared
            # cache, and a FIFO there would block this read, a link would be followed
            entry = json.loads(safe_open.read_regular(path, CACHE_ENTRY_BYTES))
            ms, at = float(entry["compile_ms"]), float(entry["measured_at"])
        except (OSError, ValueError, KeyError, TypeError):
            return
        if math.isfinite(ms) and ms > 0:
            timing.compile_cached_ms = ms
            timing.compile_cached_age_s = round(max(0.0, time.time() - at), 1)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    artifacts.write_json(path, {"compile_ms": timing.compile_ms, "eager_ms": eager_ms,
                                "measured_at": time.time()})


def scaled(interval: tuple[float, float] | None, factor: float) -> list[float] | None:
    return [interval[0] * factor, interval[1] * factor] if interval else None


def profile_note(candidate: dict, reference: dict, timing: Timing) -> str:
    """A sentence where a profiled call (its events' total, as the Profile tab shows them)
    and the timed median differ by more than PROFILE_GAP times, on either side; else ""."""
    if not timing.real:
        return ""
    said = []
    for name, reply, timed in (("candidate", candidate, timing.candidate_ms),
                               ("reference", reference, timing.eager_ms)):
        events = reply.get("events") or []
        profiled = sum(e["duration_us"] for e in events) / 1e3 if events else None
        if not profiled or not timed:
            continue
        gap = max(profiled / timed, timed / profiled)
        if gap > PROFILE_GAP:
            said.append(f"the {name}'s profiled call took {profiled:.4g} ms where its timed "
                        f"median is {timed:.4g} ms ({gap:.1f}x)")
    if not said:
        return ""
    calls = len(candidate.get("calls_ms") or []) or 1
    return ("; ".join(said) + f" (the median of {calls} profiled calls): the profiler's own "
            "cost or another moment's load is in the profile; read its events against each "
            "other, and the timing for the time")
