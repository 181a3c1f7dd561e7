"""Speedups as intervals, in one place: how every view writes them, and when one is faster.

The evaluator gives each speedup a 95 % interval over the paired ratios of its interleaved rounds
(`Timing.speedup_vs_eager_ci`, `speedup_vs_compile_ci`: [low, high], or None where there is none:
a run saved before intervals existed, Triton's interpreter). Every view writes a speedup the same
way, `1.42x ±6%` (the interval's half-width as a share of the point), and the point alone where
there is no interval; never a crash on a missing or malformed one.

    speedup_text(point, ci)     "1.42x ±6%", "1.42x", or "-"
    faster_than(point, ci, p)   fast_p's test: the interval's low end above p (the point where
                                there is no interval)
    compare(a, b)               "better" | "tie" | "worse": candidate `a` against the best `b`
                                (speedup-like: a beats b only when a's low end clears b's high)
    roofline_text(fraction)     "42.0%", or ">100% (ceiling underestimated)", never above 100 %
    bar_fraction(fraction)      a roofline bar's width, capped at a full bar

Under load (`Timing.busy`) a view leads with the candidate's own time (`own_ms`: its blocks' low
calls, the load mostly left out) and its head-to-head with the best of its time (`versus_text`,
timed in the same rounds: what decides), and writes the vs-eager ratio with its interval itself
(`shown_speedup`: "5.00x (95 % interval 2-20x)"): on a contested CPU that interval spans the
block medians' and the low calls' and is wide and lopsided, so a ± would misstate it.

    versus_text(versus)         the head-to-head in words ("1.21x faster side by side (...)");
                                named=True says with whom ("1.21x faster than 0.0 side by side")
    versus_tag(versus)          its few words for a chip or a table cell ("faster than 0.0 side
                                by side")
    own_ms(timing)              the time a view leads with; own_time_text(timing) says which,
                                own_time_cell(timing) in a table cell ("0.45 ms own (busy)")
    shown_speedup(timing)       timing_speedup, with the interval itself on a busy CPU

Views read timings as dicts (the run record) or as `Timing` objects: `field(t, name)` reads both.
"""
from __future__ import annotations

import math

CEILING_NOTE = "ceiling underestimated"
FASTER_NOTE = "faster = 95 % interval above 1x"
DECIDED = ("faster", "slower", "tie")      # a head-to-head's verdicts; else "void"


def field(timing, name: str, default=None):
    """A field of a Timing (or Roofline) object or of its dict."""
    if timing is None:
        return default
    if isinstance(timing, dict):
        return timing.get(name, default)
    return getattr(timing, name, default)


def valid_ci(ci) -> tuple[float, float] | None:
    """[low, high] as two finite numbers with low <= high, else None (old runs, bad data)."""
    try:
        low, high = (float(v) for v in ci)
    except (TypeError, ValueError):
        return None
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        return None
    return low, high


def half_width(point, ci) -> float | None:
    """The interval's half-width as a share of the point (0.06 for ±6 %)."""
    bounds = valid_ci(ci)
    if bounds is None or not point or not math.isfinite(point):
        return None
    return (bounds[1] - bounds[0]) / 2 / abs(point)


def pm_text(point, ci) -> str:
    """"±6%" (under 1 %: one decimal, "±0.4%"); "" without an interval."""
    share = half_width(point, ci)
    if share is None:
        return ""
    pct = share * 100
    return f"±{pct:.1f}%" if pct < 0.95 else f"±{pct:.0f}%"


def speedup_text(point, ci=None, digits: int = 2, noisy: bool = False) -> str:
    """"1.42x ±6%"; the point alone without an interval; "-" without a point. `noisy` adds
    " (noisy)": the interval stayed wider than the evaluator's goal."""
    if point is None:
        return "-"
    text = f"{point:.{digits}f}x"
    pm = pm_text(point, ci)
    return (f"{text} {pm}" if pm else text) + (" (noisy)" if noisy else "")


def interval_text(ci) -> str:
    """"95 % interval 1.33-1.51x", for tooltips and titles; "" without one."""
    bounds = valid_ci(ci)
    return f"95 % interval {bounds[0]:.3g}-{bounds[1]:.3g}x" if bounds else ""


def timing_speedup(timing, baseline: str = "eager", digits: int = 2, mark_noise: bool = True
                   ) -> str:
    """A Timing's (or its dict's) speedup vs `baseline` ("eager" or "compile") as text."""
    return speedup_text(field(timing, f"speedup_vs_{baseline}"),
                        field(timing, f"speedup_vs_{baseline}_ci"), digits,
                        bool(mark_noise and field(timing, "noisy")))


def low_end(point, ci):
    """The interval's low end, or the point where there is no interval."""
    bounds = valid_ci(ci)
    return bounds[0] if bounds else point


def faster_than(point, ci, p: float = 1.0) -> bool:
    """Whether a speedup counts as more than p times faster: its interval's low end is above p
    (without an interval, the point is)."""
    low = low_end(point, ci)
    return low is not None and low > p


def compare(a, b) -> str:
    """Candidate timing `a` against the best's timing `b` (Timing objects or dicts):
    "better" when a is faster and, where both have a speedup vs eager with an interval, a's
    interval lies wholly above b's; "tie" when a is faster on its point but the intervals
    overlap; "worse" otherwise. Without speedups (eager not timed) the times compare."""
    sa, sb = field(a, "speedup_vs_eager"), field(b, "speedup_vs_eager")
    if sa and sb:
        if sa <= sb:
            return "worse"
        ca = valid_ci(field(a, "speedup_vs_eager_ci"))
        cb = valid_ci(field(b, "speedup_vs_eager_ci"))
        if ca and cb and not ca[0] > cb[1]:
            return "tie"
        return "better"
    ma, mb = field(a, "candidate_ms"), field(b, "candidate_ms")
    if ma is None or mb is None:
        return "worse"
    return "better" if ma < mb else "worse"


def roofline_text(fraction, exceeded: bool = False, spec: str = ".1%") -> str:
    """The fraction of the speed of light; above 1 (or flagged) it is not a fact but a sign the
    ceiling is too low: ">100% (ceiling underestimated)"."""
    if fraction is None:
        return "-"
    if exceeded or fraction > 1:
        return f">100% ({CEILING_NOTE})"
    return format(fraction, spec)


def bar_fraction(fraction) -> float:
    """A roofline bar's width in [0, 1]: a fraction above 1 is a full bar, never more."""
    if fraction is None or not math.isfinite(fraction):
        return 0.0
    return min(max(fraction, 0.0), 1.0)


BUSY_LEAD = "the machine was busy while timing"


def busy_text(note: str = "", ids=()) -> str:
    """The busy banner: "the machine was busy while timing (candidates 0.0, 1.1): speedups may
    be off; NOTE", or, where the note itself opens with those words (the evaluator's does), the
    note with the candidates named in it, so that the banner says it once."""
    which = f"candidate{'s' if len(ids) > 1 else ''} {', '.join(ids)}" if ids else ""
    if note.startswith(BUSY_LEAD):
        return BUSY_LEAD + (f" {which}" if which else "") + note[len(BUSY_LEAD):]
    return (f"{BUSY_LEAD}{f' ({which})' if which else ''}: speedups may be off"
            + (f"; {note}" if note else ""))


def spread_text(point, ci=None, digits: int = 2, noisy: bool = False, compact: bool = False
                ) -> str:
    """A speedup with its interval written out: "5.00x (95 % interval 2-20x)" (`compact`:
    "5.00x (2-20x)"); the point alone without an interval; "-" without a point."""
    if point is None:
        return "-"
    bounds = valid_ci(ci)
    text = f"{point:.{digits}f}x"
    if bounds:
        span = f"{bounds[0]:.3g}-{bounds[1]:.3g}x"
        text += f" ({span})" if compact else f" (95 % interval {span})"
    return text + (" (noisy)" if noisy else "")


def shown_speedup(timing, baseline: str = "eager", digits: int = 2, mark_noise: bool = True,
                  compact: bool = False) -> str:
    """A speedup as a view shows it: "1.42x ±6%" (timing_speedup), but on a busy CPU with its
    interval written out, "5.00x (95 % interval 2-20x)": there the interval spans the block
    medians' and the low calls' (evaluator/parent/figures.py busy_figures), wide and lopsided."""
    if not field(timing, "busy"):
        return timing_speedup(timing, baseline, digits, mark_noise)
    return spread_text(field(timing, f"speedup_vs_{baseline}"),
                       field(timing, f"speedup_vs_{baseline}_ci"), digits,
                       bool(mark_noise and field(timing, "noisy")), compact)


def own_ms(timing):
    """The time a view leads with: on a busy CPU the candidate's own time (`candidate_low_ms`,
    the median over rounds of each block's low calls: the load mostly left out) where the
    timing has it, else `candidate_ms` (the median of its blocks)."""
    low = field(timing, "candidate_low_ms")
    return low if field(timing, "busy") and low else field(timing, "candidate_ms")


def own_time_text(timing) -> str:
    """"0.55 ms, its own time (its blocks' low calls: the load mostly left out; their medians
    0.9 ms)" on a busy CPU; "0.625 ms" otherwise; "" without a time."""
    ms, low = field(timing, "candidate_ms"), field(timing, "candidate_low_ms")
    if ms is None:
        return ""
    if field(timing, "busy") and low:
        return (f"{low:.4g} ms, its own time (its blocks' low calls: the load mostly left out; "
                f"their medians {ms:.4g} ms)")
    return f"{ms:.4g} ms"


def own_time_cell(timing) -> str:
    """The time a view leads with, for a table cell, as the view's Performance table writes
    it: "0.45 ms own (busy)" (its blocks' low calls), "0.8 ms (busy)" where the timing has no
    low calls, "0.625 ms"; "-" without a time."""
    ms = own_ms(timing)
    if ms is None:
        return "-"
    if not field(timing, "busy"):
        return f"{ms:.4g} ms"
    return f"{ms:.4g} ms " + ("own (busy)" if field(timing, "candidate_low_ms") else "(busy)")


def decided(versus) -> bool:
    """Whether a head-to-head has a verdict (faster, slower or a tie), not void."""
    return isinstance(versus, dict) and versus.get("verdict") in DECIDED and \
        versus.get("ratio") is not None


def versus_text(versus: dict, named: bool = False) -> str:
    """A head-to-head in words: "1.21x faster side by side (95 % interval 1.15-1.27x)", "a tie
    at ... side by side ...: within ±3%, what one kernel shows against itself, or an interval
    across 1x", "0.80x, slower side by side ...". `named` says with whom: "1.21x faster than
    0.0 side by side (...)", "tie with 0.0 side by side at 1.02x (...): ...", "0.80x, slower
    than 0.0 side by side (...)", and a void one "no head-to-head with 0.0: why"."""
    rival = versus.get("id") if named else None
    if not decided(versus):
        why = versus.get("why") or "it was not timed"
        return f"no head-to-head with {rival}: {why}" if rival else f"no head-to-head: {why}"
    ratio, ci = versus["ratio"], valid_ci(versus.get("ci"))
    span = f" (95 % interval {ci[0]:.3g}-{ci[1]:.3g}x)" if ci else ""
    than = f" than {rival}" if rival else ""
    if versus["verdict"] == "faster":
        return f"{ratio:.2f}x faster{than} side by side{span}"
    if versus["verdict"] == "slower":
        return f"{ratio:.2f}x, slower{than} side by side{span}"
    tie = f"tie with {rival} side by side at {ratio:.2f}x" if rival else \
        f"a tie at {ratio:.2f}x side by side"
    return (f"{tie}{span}: within ±{versus.get('noise', 0):.0%}, what one kernel shows against "
            "itself, or an interval across 1x")


def versus_tag(versus) -> str:
    """A head-to-head in a few words, for a chip, a tree row or a table cell: "faster than 0.0
    side by side", "slower than 0.0 side by side", "tie with 0.0 side by side", "no
    head-to-head with 0.0"; "" without one (versus_text says it whole)."""
    if not isinstance(versus, dict) or not versus.get("id"):
        return ""
    rival = versus["id"]
    if not decided(versus):
        return f"no head-to-head with {rival}"
    if versus["verdict"] == "tie":
        return f"tie with {rival} side by side"
    return f"{versus['verdict']} than {rival} side by side"
