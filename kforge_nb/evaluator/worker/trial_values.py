"""The tails trial: the magnitudes, signs and special values get_inputs() never draws.

get_inputs() draws from one distribution (randn, rand), and a kernel can be right on all of it
and wrong beyond: a ReLU that answers 0 above 40, a softmax whose exp overflows past 88, a
sum that drops small terms. The tails trial takes the trial's ordinary draw and replaces a
seeded share of each floating input's elements with values from its tails:

* large: `sign(x) * m * 2**u`, u uniform in [1, 6], m the input's own largest magnitude: up to
  64 times the draw's range (randn's ~4 gives ~250), both signs where the draw has both. Not
  further: an output that is ill-conditioned in its inputs (a softmax of products) moves with
  the square of the magnitude under any change of rounding, and the float64 answer of
  softmax(bmm) (tests/test_builtin.py) against the float32 reference used at most 25 % of the
  tolerance in 2000 draws at 2**6, but over 100 % in one draw of 2000 at 2**8. Half types are
  capped at sqrt(max), so a square stays finite;
* tiny: `sign(x) * 2**v`, from twice the smallest normal up to its square root: values near the
  bottom of the range, normal ones (a GPU that flushes subnormals to zero still sees them as
  they are, so an honest kernel is not blamed for its hardware's flush);
* zero: an exact 0, only where the draw itself reaches 0 or below (a log or a sqrt of a
  positive draw never gets one).

Signs are kept element by element, so an input drawn positive stays positive. Both workers
draw the same values: the choices continue the generator that the trial's seed started.

Whether the module is defined out there is the reference's to say: the judge runs it on the
tails trial, and where an output is not finite (or the reference raises) the trial is dropped,
and the verdict says so (see `unusable`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

TAILS = "tails"
DESCRIPTION = "tail values (large, tiny, zero)"
SHARE = 1 / 16             # of each input's elements, for each of large, tiny and zero
LARGE_OCTAVES = (1, 6)     # large values: the draw's largest magnitude times 2**[1, 6]
CHUNK = 1 << 24


def is_tails(trial: dict) -> bool:
    return trial.get("distribution") == TAILS


def with_tails(inputs: list) -> list:
    """The inputs with tail values in a seeded share of every floating tensor's elements."""
    return [tailed(x) if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel()
            else x for x in inputs]


def tailed(x: torch.Tensor) -> torch.Tensor:
    """A copy of x with tail values, a chunk at a time (inputs can be gigabytes). The draw's
    own highest and lowest values become the top of the range, signs kept: every input
    reaches its extremes whatever the seeded picks."""
    out = x.clone(memory_format=torch.contiguous_format)
    flat = out.view(-1)
    drawn = Extent.of(flat)
    for start in range(0, flat.numel(), CHUNK):
        piece = flat[start:start + CHUNK]
        piece.copy_(tailed_piece(piece, drawn.m, drawn.reaches_zero))
    top = float(large(drawn.m, torch.ones(()), x.dtype))
    for index, value in ((drawn.highest, drawn.high), (drawn.lowest, drawn.low)):
        if math.isfinite(value):
            flat[index] = math.copysign(top, value) if value else 0.0
    return out


@dataclass
class Extent:
    """A draw's largest finite magnitude m (1 where there is none), its highest and lowest
    finite values (infinite where there is none) and where they are."""
    m: float = 1.0
    high: float = -math.inf
    low: float = math.inf
    highest: int = 0
    lowest: int = 0

    @property
    def reaches_zero(self) -> bool:
        return self.low <= 0

    @classmethod
    def of(cls, flat: torch.Tensor) -> "Extent":
        e = cls(m=0.0)
        for start in range(0, flat.numel(), CHUNK):
            piece = flat[start:start + CHUNK]
            finite = piece.isfinite()
            e.m = max(e.m, float(torch.where(finite, piece.abs(), 0).max()))
            high = torch.where(finite, piece, -math.inf).max(0)
            low = torch.where(finite, piece, math.inf).min(0)
            if float(high.values) > e.high:
                e.high, e.highest = float(high.values), start + int(high.indices)
            if float(low.values) < e.low:
                e.low, e.lowest = float(low.values), start + int(low.indices)
        e.m = e.m or 1.0
        return e


def tailed_piece(piece: torch.Tensor, m: float, reaches_zero: bool) -> torch.Tensor:
    work = torch.float64 if piece.dtype == torch.float64 else torch.float32
    values = piece.to(work)
    pick = torch.rand(piece.shape, device=piece.device, dtype=work)
    spread = torch.rand(piece.shape, device=piece.device, dtype=work)
    sign = torch.sign(values)
    out = torch.where(pick < SHARE, sign * large(m, spread, piece.dtype), values)
    out = torch.where((pick >= SHARE) & (pick < 2 * SHARE), sign * tiny(spread, piece.dtype), out)
    if reaches_zero:
        out = torch.where((pick >= 2 * SHARE) & (pick < 3 * SHARE), 0.0, out)
    return out


def large(m: float, spread: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    low, high = LARGE_OCTAVES
    values = m * torch.exp2(low + (high - low) * spread)
    return values.clamp_max(math.sqrt(torch.finfo(dtype).max)) if dtype.itemsize < 4 else values


def tiny(spread: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """From 2x the smallest normal up to its square root, log-uniform."""
    bottom = math.log2(torch.finfo(dtype).tiny)
    return torch.exp2((bottom + 1) + (bottom / 2 - bottom - 1) * spread)


def unusable(trial: dict, outputs: list) -> str:
    """Why the reference's outputs on a tails trial cannot judge a kernel ("" where they can).

    A value that is not finite there means the module is not defined that far out (an exp
    past 88, a product that overflows). Inf and NaN match only themselves, and a kernel that
    reaches the same overflow by another path (NaN for inf, inf for a large finite value)
    would be blamed for the module's own limits, so the trial is dropped rather than scaled
    down: dropping needs no second draw the candidate would have to be told of (on the CPU it
    runs the trial while the judge computes the reference), and the other trials still hold
    the kernel to every ordinary value."""
    if not is_tails(trial) or all(all_finite(o) for o in outputs):
        return ""
    return (f"trial {trial['trial']} skipped: the reference's output is not finite (inf or "
            f"NaN) on {DESCRIPTION}")


def all_finite(t: torch.Tensor) -> bool:
    if not (t.is_floating_point() or t.is_complex()):
        return True
    flat = t.reshape(-1)
    return all(bool(flat[s:s + CHUNK].isfinite().all()) for s in range(0, flat.numel(), CHUNK))
