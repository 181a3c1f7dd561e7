"""Compare candidate outputs with reference outputs. Runs in the judge, never near candidate code.

Tolerances come from one table keyed by precision policy and dtype. Besides the elementwise
test |c - r| <= atol·scale + rtol·|r|, the relative norm ||c - r|| / ||r|| must be small, so an
output of near-zero values cannot pass by answering zeros.

`scale` is the reference's RMS when that exceeds 1: a sum of K products of size ~s lands near
s·sqrt(K), and any other summation order (another GEMM blocking, a tree reduction) differs from
it by rounding on that scale. Elements near zero in such an output cannot be held to an absolute
1e-4; the relative-norm guard still holds the whole output to 1e-4.

The guard stops at the dtype's rounding floor: an error whose RMS is below one unit of float
rounding (eps · scale) is rounding noise, not a missing answer; a reference that is itself that
small is the noise of a computation whose true answer is zero (the mean of a normalised tensor),
which no summation order reproduces.
"""
from __future__ import annotations

import torch

from ..result import Correctness

# policy -> dtype -> (atol, rtol, max relative norm error)
TOLERANCES = {
    "strict": {torch.float32: (1e-4, 1e-4, 1e-4), torch.float64: (1e-7, 1e-7, 1e-7),
               torch.float16: (1e-3, 1e-3, 1e-3), torch.bfloat16: (1e-2, 1e-2, 8e-3)},
    "tf32": {torch.float32: (5e-3, 5e-3, 3e-3)},
    "bf16": {torch.float32: (3e-2, 3e-2, 2e-2), torch.bfloat16: (3e-2, 3e-2, 2e-2)},
    "fp16": {torch.float32: (1e-2, 1e-2, 5e-3), torch.float16: (1e-2, 1e-2, 5e-3)},
}
POLICIES = tuple(TOLERANCES)


def tolerance(dtype: torch.dtype, policy: str) -> tuple[float, float, float]:
    return TOLERANCES.get(policy, {}).get(dtype) or TOLERANCES["strict"].get(dtype, (0.0, 0.0, 0.0))


def describe(trial: dict) -> str:
    parts = [f"trial {trial['trial']} (seed {trial['seed']})" if trial.get("trial") else
             f"trial seed {trial['seed']}"]
    if trial.get("distribution", "given") != "given":
        parts.append(f"{trial['distribution']} inputs")
    if trial.get("batch"):
        parts.append(f"batch size changed to {trial['batch']}")
    return ", ".join(parts)


def check_trial(trial: dict, inputs_before: list, ref_outputs: list, inputs_after: list,
                outputs: list, policy: str, report: Correctness) -> tuple[bool, str]:
    """One trial: inputs untouched (their fingerprints, see harness.fingerprint), then every
    output within tolerance."""
    for i, (before, after) in enumerate(zip(inputs_before, inputs_after)):
        if before is not None and before != after:
            report.failed_check = describe(trial)
            return False, f"input {i} was modified in place ({describe(trial)})"
    ok, message = compare_outputs(ref_outputs, outputs, policy, report)
    if not ok:
        report.failed_check = describe(trial)
        return False, f"{message} ({describe(trial)})"
    report.passed_trials += 1
    return True, ""


def compare_outputs(refs: list, cands: list, policy: str, report: Correctness) -> tuple[bool, str]:
    """`cands`: tensors, or outputs streamed from the candidate's file (transfer.Streamed): the
    same shape, dtype and values in order, never all in memory at once."""
    if len(refs) != len(cands):
        return False, (f"returned {len(cands)} output{'s' * (len(cands) != 1)}, the reference "
                       f"returns {len(refs)}")
    for k, (r, c) in enumerate(zip(refs, cands)):
        name = f"output {k}" if len(refs) > 1 else "output"
        # the first output's shape and dtype; on a mismatch, those of the output that differs
        report.shape, report.dtype = list(r.shape), str(r.dtype).replace("torch.", "")
        if c is None:
            return False, f"{name} is not a tensor"
        if c.shape != r.shape:
            return False, f"{name} has shape {tuple(c.shape)}, expected {tuple(r.shape)}"
        if c.dtype != r.dtype:
            return False, f"{name} has dtype {c.dtype}, expected {r.dtype}"
        ok, message = compare_values(r, c, policy, report)
        if not ok:
            return False, f"{name}: {message}"
    if refs:
        report.shape, report.dtype = list(refs[0].shape), str(refs[0].dtype).replace("torch.", "")
    return True, ""


# Elements compared at a time: temporaries of a chunk stay well under a GiB, whatever the
# output's size (KernelBench level 1 has 1.6 G-element outputs).
CHUNK = 1 << 24


def pieces(c, device: torch.device):
    """c's values, flat, CHUNK at a time, on `device`: slices of a tensor, or reads of a file."""
    if isinstance(c, torch.Tensor):
        flat = c.reshape(-1)
        for start in range(0, flat.numel(), CHUNK):
            yield start, flat[start:start + CHUNK].to(device)
    else:
        yield from c.pieces(CHUNK, device)


def chunks(r: torch.Tensor, c):
    fr = r.reshape(-1)
    for start, piece in pieces(c, r.device):
        yield start, fr[start:start + piece.numel()].double(), piece.double()


def compare_values(r: torch.Tensor, c, policy: str, report: Correctness) -> tuple[bool, str]:
    atol, rtol, rel_norm_tol = tolerance(r.dtype, policy)
    report.tolerance = {"atol": atol, "rtol": rtol, "rel_norm": rel_norm_tol, "policy": policy}
    exact = not (r.is_floating_point() or r.is_complex())
    if exact:
        atol = rtol = 0.0
    sum_sq, count = reference_squares(r) if not exact else (0.0, 0)
    scale = 1.0 if exact or not count else max(1.0, (sum_sq / count) ** 0.5)
    report.tolerance["atol_scaled"] = atol * scale
    # the quick pass proves "every value within tolerance" in the outputs' own precision;
    # anything else (a value outside, a non-finite one) is explained by the exact pass
    quick = None
    if exact:
        quick = all(torch.equal(r.reshape(-1)[s:s + p.numel()], p) for s, p in pieces(c, r.device))
    elif count == r.numel() and not r.is_complex():
        quick = within_tolerance(r, c, atol * scale, rtol)
    if quick:
        report.max_abs_error = report.max_abs_error or 0.0
        report.max_rel_error = report.max_rel_error or 0.0
        report.mismatch_fraction = 0.0
        if exact:
            return True, ""
        quick.fill(report)
        report.rel_norm_error = max(report.rel_norm_error or 0.0, quick.rel_norm)
        if quick.rel_norm > rel_norm_tol and above_floor(quick.err_sq, r, scale):
            return False, near_zero(quick.rel_norm, rel_norm_tol)
        return True, ""
    acc = ErrorAccumulator(r.shape)
    for start, r64, c64 in chunks(r, c):
        same_nonfinite = (r64.isnan() & c64.isnan()) | (r64.isinf() & (r64 == c64))
        diff = (c64 - r64).abs().masked_fill(same_nonfinite, 0.0)
        diff = torch.where(diff.isnan(), torch.full_like(diff, float("inf")), diff)
        bad = diff > atol * scale + rtol * r64.abs().masked_fill(~r64.isfinite(), 0.0)
        acc.add(start, r64, c64, diff, bad, ~same_nonfinite)
    acc.fill(report)
    if exact:
        return acc.bad == 0, f"{acc.bad} of {r.numel()} values differ{first_difference(report, r)}"
    ref_norm, err_norm = acc.ref_sq ** 0.5, acc.err_sq ** 0.5
    rel_norm = err_norm / ref_norm if ref_norm > 0 else (0.0 if err_norm == 0 else float("inf"))
    report.rel_norm_error = max(report.rel_norm_error or 0.0, rel_norm)
    if acc.bad:
        return False, (f"{report.mismatch_fraction:.2%} of values outside atol={atol * scale:.3g}, "
                       f"rtol={rtol:g}; max abs error {report.max_abs_error:.3g}")
    if rel_norm > rel_norm_tol and above_floor(acc.err_sq, r, scale):
        return False, near_zero(rel_norm, rel_norm_tol)
    return True, ""


def above_floor(err_sq: float, r: torch.Tensor, scale: float) -> bool:
    """Whether the error's RMS passes one unit of rounding in r's dtype (at the output's scale)."""
    eps = torch.finfo(r.dtype).eps if r.is_floating_point() else 0.0
    return (err_sq / max(r.numel(), 1)) ** 0.5 > eps * scale


def near_zero(rel_norm: float, tol: float) -> str:
    return (f"relative error norm {rel_norm:.3g} exceeds {tol:g} "
            "(values are near zero and the answer is not: zeros or garbage?)")


def squares(x: torch.Tensor) -> float:
    """Sum of squares, in x's precision (inf where it overflows: the caller then looks closer)."""
    return float(torch.linalg.vector_norm(x)) ** 2


def reference_squares(r: torch.Tensor) -> tuple[float, int]:
    """The sum of squares of the reference's finite values and their count (the absolute
    tolerance's scale is their RMS)."""
    sum_sq, count = 0.0, 0
    flat = r.reshape(-1)
    for start in range(0, flat.numel(), CHUNK):
        piece = flat[start:start + CHUNK]
        total = squares(piece) if not piece.is_complex() else float("nan")
        if total != float("inf") and total == total:       # every value finite
            sum_sq, count = sum_sq + total, count + piece.numel()
            continue
        r64 = piece.double()
        finite = r64[r64.isfinite()]
        sum_sq += float(finite.pow(2).sum())
        count += finite.numel()
    return sum_sq, count


class Quick:
    """What the quick pass gathers: maxima and the two norms."""

    def __init__(self):
        self.max_abs = self.max_rel = self.ref_sq = self.err_sq = 0.0

    @property
    def rel_norm(self) -> float:
        ref, err = self.ref_sq ** 0.5, self.err_sq ** 0.5
        return err / ref if ref > 0 else (0.0 if err == 0 else float("inf"))

    def fill(self, report: Correctness) -> None:
        report.max_abs_error = max(report.max_abs_error or 0.0, self.max_abs)
        report.max_rel_error = max(report.max_rel_error or 0.0, self.max_rel)


def within_tolerance(r: torch.Tensor, c, atol: float, rtol: float) -> Quick | None:
    """|c - r| <= atol + rtol |r| everywhere, in r's precision (float32 for the half types: a
    difference of two float32 values is exact to 6e-8 of its size, far inside 1e-4): a few
    passes a chunk into buffers allocated once (a fresh 64 MB temporary costs more in page
    faults than the arithmetic), instead of the exact pass's dozens in float64 (~5 s for
    2 GiB on two cores, not ~120). None where any value fails (NaN too: NaN <= x is false).
    `r` is finite everywhere (the caller checked)."""
    quick = Quick()
    fr = r.reshape(-1)
    kind = torch.float32 if fr.dtype in (torch.float16, torch.bfloat16) else fr.dtype
    n = min(CHUNK, fr.numel())
    diff, size = (torch.empty(n, dtype=kind, device=r.device) for _ in range(2))
    ok = torch.empty(n, dtype=torch.bool, device=r.device)
    for start, piece in pieces(c, r.device):
        m = piece.numel()
        ref, d, s, good = fr[start:start + m], diff[:m], size[:m], ok[:m]
        if kind != fr.dtype:
            ref, piece = ref.float(), piece.float()
        torch.sub(piece, ref, out=d).abs_()
        torch.abs(ref, out=s)
        torch.le(d, s.mul_(rtol).add_(atol), out=good)
        if not bool(good.all()):
            return None
        quick.err_sq += squares(d)
        quick.ref_sq += squares(ref)
        if m:
            quick.max_abs = max(quick.max_abs, float(d.max()))
            torch.abs(ref, out=s).clamp_min_(1e-12)
            quick.max_rel = max(quick.max_rel, float(d.div_(s).max()))
    return quick


def first_difference(report: Correctness, r: torch.Tensor) -> str:
    """An exact (integer, bool) output's worst difference, as its own type: `; at [3, 1]: got
    True, expected False` (`; at [2]: got 5, expected 4`)."""
    if not report.worst:
        return ""
    cast = bool if r.dtype == torch.bool else int
    w = report.worst[0]
    return f"; at {w['index']}: got {cast(w['got'])}, expected {cast(w['expected'])}"


class ErrorAccumulator:
    """Error statistics gathered chunk by chunk: maxima, counts, norms, the worst elements and
    a max-pooled map of |c - r| (at most 64x64 over rows x last dimension, or 64 bins)."""

    def __init__(self, shape: torch.Size, size: int = 64):
        self.shape, self.numel = shape, max(1, int(torch.Size(shape).numel()))
        self.cols = shape[-1] if len(shape) >= 2 else self.numel
        self.rows = self.numel // max(1, self.cols)
        self.row_bins = min(size, self.rows) if len(shape) >= 2 else 1
        self.col_bins = min(size, self.cols)
        self.map = None
        self.max_abs = self.max_rel = 0.0
        self.bad = 0
        self.ref_sq = self.err_sq = 0.0
        self.worst: list[tuple[float, int, float, float]] = []

    def add(self, start, r64, c64, diff, bad, finite) -> None:
        if not diff.numel():
            return
        self.max_abs = max(self.max_abs, float(diff.max()))
        self.max_rel = max(self.max_rel, float((diff / r64.abs().clamp_min(1e-12)).max()))
        self.bad += int(bad.sum())
        self.ref_sq += float(r64[finite].pow(2).sum())
        self.err_sq += float(diff[finite].pow(2).sum())
        if bad.any():
            k = min(5, diff.numel())
            values, index = torch.topk(torch.where(bad, diff, -1.0), k)
            self.worst += [(float(v), start + int(i), float(c64[i]), float(r64[i]))
                           for v, i in zip(values, index) if v >= 0]
            self.worst = sorted(self.worst, key=lambda w: -w[0])[:5]
        self.pool(start, diff)

    def pool(self, start: int, diff: torch.Tensor) -> None:
        index = torch.arange(start, start + diff.numel(), device=diff.device)
        row, col = index // self.cols, index % self.cols
        bins = (row * self.row_bins // max(1, self.rows)) * self.col_bins + \
            col * self.col_bins // self.cols
        d = diff.float()
        if self.map is None:
            self.map = torch.zeros(self.row_bins * self.col_bins, device=diff.device)
        self.map.scatter_reduce_(0, bins, d, reduce="amax")

    def fill(self, report: Correctness) -> None:
        report.max_abs_error = max(report.max_abs_error or 0.0, self.max_abs)
        report.max_rel_error = max(report.max_rel_error or 0.0, self.max_rel)
        report.mismatch_fraction = self.bad / self.numel
        if not self.bad:
            return
        shape = list(self.shape)
        report.worst = [{"index": list(map(int, torch.unravel_index(torch.tensor(i), shape)))
                         if shape else [], "got": got, "expected": expected}
                        for _, i, got, expected in self.worst]
        values = self.map.cpu()
        finite = values[values.isfinite()]
        values = torch.where(values.isinf(), torch.full_like(values, float(finite.max())
                                                             if finite.numel() else 1.0), values)
        if len(shape) >= 2:
            report.error_map = {"kind": "2d", "shape": shape,
                                "values": values.reshape(self.row_bins, self.col_bins).tolist()}
        else:
            report.error_map = {"kind": "1d", "shape": shape, "values": values.tolist()}
