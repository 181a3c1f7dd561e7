"""The physics floor (rule `faster-than-hardware`): a time the hardware cannot explain is a
clock that lies, not a measurement. No correct kernel may be refused by an estimate, so the
floor refuses only what the hardware's *guaranteed* peaks (devices.guaranteed_peaks: the ISA's
or the datasheet's, whatever the load) cannot explain for the *least* work every algorithm
needs:

    refused  <=>  candidate_ms < least_bytes / guaranteed bandwidth / MARGIN

- Least work is bytes, never FLOPs. The reference's FLOP count is no lower bound: a causal
  kernel skips the masked half of a dense product, dead code computes nothing, and an algebraic
  rewrite (x @ W summed over its columns is x . (sum_j W_j)) cuts it arbitrarily. So a
  compute-bound floor never refuses.
- Least bytes are the outputs' bytes, which every call must write (each call's inputs are new,
  so its outputs are too). Not the inputs: an input the output does not depend on, or only in
  part (a slice), need not be read, and weights may be reduced once at construction (the sum
  of W's columns above).
- The guaranteed bandwidth lets the data sit in the nearest cache (CPU: cores x max clock x
  the L1's accesses a cycle x vector bytes; GPU: SMs x clock x bytes a cycle to the L2).
- MARGIN = 2 covers a max clock read too low (a hypervisor's cpufreq giving the base clock:
  turbo adds up to ~1.6x); a forged clock reads 100x or more below.

Measured ceilings (the roofline's probes) and the reference's FLOPs may only *flag*: a kernel
above the roofline's speed of light gets Roofline.ceiling_exceeded and a sentence in its timing
note saying which estimate it beat, never a verdict. The functions below are pure functions of
numbers except `check`, which reads this machine's guaranteed peaks.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...devices import Guaranteed
    from ...result import Result, Roofline

MARGIN = 2.0
RULE = "faster-than-hardware"


def least_bytes(summary: dict) -> int | None:
    """The bytes every correct answer must move in a call: its outputs' (the judge's summary
    `output_bytes`); None where the summary does not say."""
    out = summary.get("output_bytes")
    return int(out) if out else None


def floor_ms(least: int | None, bandwidth: float | None) -> float | None:
    """The least time the hardware needs to move `least` bytes at `bandwidth` bytes/s."""
    if not least or not bandwidth or bandwidth <= 0:
        return None
    return least / bandwidth * 1e3


def refusal(candidate_ms: float | None, least: int | None, guaranteed: "Guaranteed",
            margin: float = MARGIN) -> str | None:
    """The whole refusal message where `candidate_ms` is more than `margin` times below the
    time `guaranteed` needs to write `least` bytes; None otherwise (and wherever a number is
    missing: nothing known, nothing refused)."""
    floor = floor_ms(least, guaranteed.bandwidth)
    if candidate_ms is None or floor is None or candidate_ms >= floor / margin:
        return None
    below = f"{floor / candidate_ms:.3g}x" if candidate_ms > 0 else "infinitely"
    return (f"faster than the hardware allows: {candidate_ms:.4g} ms a call, yet every correct "
            f"answer writes its outputs' {least:,} bytes, and {guaranteed.device} moves at "
            f"most {guaranteed.bandwidth_formula or f'{guaranteed.bandwidth / 1e9:.4g} GB/s'}, "
            f"so a call takes at least {least:,} B / {guaranteed.bandwidth / 1e9:.4g} GB/s = "
            f"{floor:.4g} ms; this time is {below} below that floor (refused more than "
            f"{margin:g}x below it; rule `{RULE}`)")


def ceiling_note(roof: "Roofline") -> str:
    """A sentence where the candidate beat the roofline's speed of light (a flag, never a
    verdict): which estimate was beaten, and why that is possible."""
    if not roof.ceiling_exceeded or not roof.fraction_of_sol:
        return ""
    head = (f"{roof.fraction_of_sol:.2f}x the roofline's speed of light "
            f"({roof.speed_of_light_ms:.4g} ms, {roof.bound}-bound)")
    if roof.bound == "compute" and roof.peak_flops_source == "guaranteed":
        why = ("the reference's FLOP count overstates the work this kernel needs (masked, "
               "skipped or rewritten work), since no kernel beats the guaranteed peak")
    elif roof.bound == "compute":
        why = ("the measured compute ceiling is an underestimate, or the reference's FLOP count "
               "overstates the work this kernel needs")
    else:
        why = ("the measured bandwidth is an underestimate, or the kernel moves fewer bytes "
               "than every input, weight and output once (unread inputs, weights reduced once)")
    return f"{head}: {why}; flagged, not refused"


def check(result: "Result", summary: dict, device: str) -> str | None:
    """After a real timing: the refusal message where the time is below the physics floor;
    otherwise None, after adding ceiling_note's sentence to the timing's note where the
    roofline was beaten."""
    from ...devices import guaranteed_peaks
    timing = result.timing
    if not timing.real:
        return None
    refused = refusal(timing.candidate_ms, least_bytes(summary), guaranteed_peaks(device))
    if refused:
        return refused
    flag = ceiling_note(result.roofline)
    if flag:
        timing.note = f"{timing.note}; {flag}" if timing.note else flag
    return None
