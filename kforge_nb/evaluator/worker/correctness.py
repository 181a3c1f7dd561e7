"""Compare candidate outputs with reference outputs. Runs in the judge, never near candidate code.

Tolerances come from one table keyed by precision policy and dtype (a complex dtype takes its
parts' row). Besides the elementwise test |c - r| <= atol·scale + rtol·|r|, the relative norm
||c - r|| / ||r|| must be small, so an output of near-zero values cannot pass by answering
zeros. Complex outputs are compared as complex numbers: |c - r| is the modulus of the
difference, so a wrong imaginary part counts as much as a wrong real one.

`scale` is the reference's RMS when that exceeds 1: a sum of K products of size ~s lands near
s·sqrt(K), and any other summation order (another GEMM blocking, a tree reduction) differs from
it by rounding on that scale. Elements near zero in such an output cannot be held to an absolute
1e-4; the relative-norm guard still holds the whole output to 1e-4.

The guard holds at every scale, however small the values: a softmax over 2**24 positions
(values ~1e-7) answered with zeros is wrong. One output escapes it: rounding noise around a
true zero (the mean of a normalised tensor, ~1e-8), which no other summation order reproduces.
The size of the values cannot tell that noise from a small answer (nor from garbage of the same
size), so the judge asks the float64 answer (`Float64Answer`, computed only then): the output
is noise where that answer is far smaller than the reference, and the candidate then passes
where it is about as close to that answer as the reference is and its error is within one unit
of rounding at the tolerance's scale.

The float64 answer also settles a failure where the module is ill-conditioned (a softmax of
large products on the tails trial, a loss that is a small difference of large distances): there
the reference's own float32 error can exceed the tolerance, elementwise or in norm, and an honest kernel that rounds differently is held to the float64 answer with the
reference's error as slack (`ill_conditioned`).
"""
from __future__ import annotations

import copy

import torch

from ...result import Correctness
from . import trial_values
from .harness import as_tensor_list

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
    """(atol, rtol, max relative norm error) for outputs of `dtype`; a complex dtype is held
    to its parts' (complex64 to float32's)."""
    dtype = dtype.to_real() if dtype.is_complex else dtype
    return TOLERANCES.get(policy, {}).get(dtype) or TOLERANCES["strict"].get(dtype, (0.0, 0.0, 0.0))


def describe(trial: dict) -> str:
    parts = [f"trial {trial['trial']} (seed {trial['seed']})" if trial.get("trial") else
             f"trial seed {trial['seed']}"]
    if trial_values.is_tails(trial):
        parts.append(f"inputs with {trial_values.DESCRIPTION}")
    elif trial.get("distribution", "given") != "given":
        parts.append(f"{trial['distribution']} inputs")
    if trial.get("batch"):
        parts.append(f"batch size changed to {trial['batch']}")
    return ", ".join(parts)


def check_trial(trial: dict, inputs_before: list, ref_outputs: list, inputs_after: list,
                outputs: list, policy: str, report: Correctness,
                exact: "Float64Answer | None" = None) -> tuple[bool, str]:
    """One trial: inputs untouched (their fingerprints, see harness.fingerprint), then every
    output within tolerance."""
    modified = first_modified(inputs_before, inputs_after)
    if modified is not None:
        report.failed_check = describe(trial)
        return False, f"input {modified} was modified in place ({describe(trial)})"
    ok, message = compare_outputs(ref_outputs, outputs, policy, report, exact)
    if not ok:
        report.failed_check = describe(trial)
        return False, f"{message} ({describe(trial)})"
    report.passed_trials += 1
    return True, ""


def first_modified(before: list, after: list) -> int | None:
    """The first input whose fingerprint after the call is not the one before it (None: all
    left alone; a value that is not a tensor has none)."""
    return next((i for i, (b, a) in enumerate(zip(before, after))
                 if b is not None and b != a), None)


def compare_outputs(refs: list, cands: list, policy: str, report: Correctness,
                    exact: "Float64Answer | None" = None) -> tuple[bool, str]:
    """`cands`: tensors, or outputs streamed from the candidate's file (transfer.Streamed): the
    same shape, dtype and values in order, never all in memory at once. `exact`: the reference
    in float64, asked only where an output is near rounding noise or fails the tolerance."""
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
        ok, message = compare_values(r, c, policy, report,
                                     exact and (lambda k=k: exact.output(k)))
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


def widened(x: torch.Tensor) -> torch.Tensor:
    """x in float64 (complex128 for a complex x: its imaginary part kept)."""
    return x.to(torch.complex128) if x.is_complex() else x.double()


def chunks(r: torch.Tensor, c):
    fr = r.reshape(-1)
    for start, piece in pieces(c, r.device):
        yield start, widened(fr[start:start + piece.numel()]), widened(piece)


def compare_values(r: torch.Tensor, c, policy: str, report: Correctness,
                   exact=None) -> tuple[bool, str]:
    """c against r within the policy's tolerance. `exact`: a callable giving r's float64
    answer (None where it cannot be computed), asked only where r may be rounding noise or c
    fails around r."""
    atol, rtol, rel_norm_tol = tolerance(r.dtype, policy)
    report.tolerance = {"atol": atol, "rtol": rtol, "rel_norm": rel_norm_tol, "policy": policy}
    if not (r.is_floating_point() or r.is_complex()):
        report.tolerance["atol_scaled"] = 0.0
        return compare_exactly(r, c, report)
    sum_sq, count = reference_squares(r)
    scale = max(1.0, (sum_sq / count) ** 0.5) if count else 1.0
    report.tolerance["atol_scaled"] = atol * scale
    # the quick pass proves "every value within tolerance" in the outputs' own precision;
    # anything else (a value outside, a non-finite one, complex values) is explained by the
    # exact pass
    quick = within_tolerance(r, c, atol * scale, rtol) \
        if count == r.numel() and not r.is_complex() else None
    if quick:
        report.mismatch_fraction = 0.0
        quick.fill(report)
        rel_norm, err_sq = quick.rel_norm, quick.err_sq
    else:
        acc = elementwise(r, c, atol * scale, rtol)
        acc.fill(report)
        if acc.bad and not ill_conditioned(r, c, atol * scale, rtol, rel_norm_tol, exact):
            return False, (f"{report.mismatch_fraction:.2%} of values outside "
                           f"atol={atol * scale:.3g}, rtol={rtol:g}; max abs error "
                           f"{report.max_abs_error:.3g}{worst_part(report, r)}"
                           f"{one_step(acc)}")
        if acc.bad:
            report.tolerance["widened_by_reference_error"] = CONDITION_FACTOR
            return True, ""
        rel_norm, err_sq = acc.rel_norm, acc.err_sq
    report.rel_norm_error = max(report.rel_norm_error or 0.0, rel_norm)
    if rel_norm <= rel_norm_tol or rounding_noise(r, c, err_sq, scale, exact):
        return True, ""
    # the norm guard widened as the elementwise test is: a small answer left by cancelling
    # larger terms (a triplet loss's hinge) where r is itself about as far off as the bound
    if ill_conditioned(r, c, atol * scale, rtol, rel_norm_tol, exact,
                       reference_near=NORM_SLACK_LIMIT * rel_norm_tol):
        report.tolerance["widened_by_reference_error"] = CONDITION_FACTOR
        return True, ""
    return False, near_zero(rel_norm, rel_norm_tol)


def elementwise(r: torch.Tensor, c, atol: float, rtol: float) -> "ErrorAccumulator":
    """The exact pass: |c - r| <= atol + rtol |r| element by element in float64 (a complex
    difference's modulus), a non-finite value matching only the same one, and what a person
    needs to see where it does not hold."""
    acc = ErrorAccumulator(r.shape)
    for start, r64, c64 in chunks(r, c):
        same_nonfinite = matching_nonfinite(r64, c64)
        diff = (c64 - r64).abs().masked_fill(same_nonfinite, 0.0)
        diff = torch.where(diff.isnan(), torch.full_like(diff, float("inf")), diff)
        bad = diff > atol + rtol * r64.abs().masked_fill(~r64.isfinite(), 0.0)
        acc.add(start, r64, c64, diff, bad, ~same_nonfinite)
    return acc


def matching_nonfinite(r64: torch.Tensor, c64: torch.Tensor) -> torch.Tensor:
    """Where r is not finite and c has the same value (NaN matching NaN; for complex values,
    part by part)."""
    if r64.is_complex():
        rp, cp = torch.view_as_real(r64), torch.view_as_real(c64)
        return ~r64.isfinite() & ((rp == cp) | (rp.isnan() & cp.isnan())).all(-1)
    return (r64.isnan() & c64.isnan()) | (r64.isinf() & (r64 == c64))


def compare_exactly(r: torch.Tensor, c, report: Correctness) -> tuple[bool, str]:
    """Integer and bool outputs: equal, value for value."""
    report.max_abs_error = report.max_abs_error or 0.0
    report.max_rel_error = report.max_rel_error or 0.0
    if all(torch.equal(r.reshape(-1)[s:s + p.numel()], p) for s, p in pieces(c, r.device)):
        report.mismatch_fraction = 0.0
        return True, ""
    acc = ErrorAccumulator(r.shape)
    for start, r64, c64 in chunks(r, c):
        diff = (c64 - r64).abs()
        acc.add(start, r64, c64, diff, diff > 0, torch.ones_like(diff, dtype=torch.bool))
    acc.fill(report)
    return False, (f"{acc.bad} of {r.numel()} values differ{first_difference(report, r)}"
                   f"{one_step(acc)}")


# Rounding noise around a true zero, told apart from a small answer by the float64 answer t:
# the reference r is noise where t is at least NOISE_FACTOR times smaller than r (r is then
# mostly its own rounding), and a candidate passes where it is at most NOISE_FACTOR times
# further from t than r is (another summation order's noise is within 2x of torch's; an answer
# that is merely small, or a t that is not r's answer at all, fails one test or the other).
NOISE_FACTOR = 10


def rounding_noise(r: torch.Tensor, c, err_sq: float, scale: float, exact) -> bool:
    """Whether c's error, though large against r, is rounding noise around a true zero: below
    one unit of rounding at the tolerance's scale, and r and c both noise by the float64
    answer. Without that answer the guard holds: a small value is not noise until the exact
    answer says so."""
    if not within_rounding(err_sq, r, scale):
        return False
    t = exact() if exact else None
    if t is None or t.shape != r.shape:
        return False
    flat = t.reshape(-1)
    ref_sq = exact_sq = ref_off = cand_off = 0.0
    for start, r64, c64 in chunks(r, c):
        t64 = widened(flat[start:start + r64.numel()])
        kept = r64.isfinite() & t64.isfinite()
        if not bool(kept.all()):
            r64, c64, t64 = (torch.where(kept, v, 0) for v in (r64, c64, t64))
        ref_sq += squares(r64)
        exact_sq += squares(t64)
        ref_off += squares(r64 - t64)
        cand_off += squares(c64 - t64)
    return exact_sq * NOISE_FACTOR ** 2 <= ref_sq and cand_off <= NOISE_FACTOR ** 2 * ref_off


# Where the reference is itself far from its float64 answer t, the module is ill-conditioned
# there (a softmax of large products, as the tails trial draws: any other rounding of the
# products moves the weights, and the reference's float32 is as far off as an honest kernel's).
# A candidate outside the tolerance around r then passes where it is within the tolerance
# around t widened by CONDITION_FACTOR times r's own error, element by element and in norm: a
# wrong answer is wrong against t as well, and where r is exact the slack is zero.
CONDITION_FACTOR = 2


# The norm guard takes that slack only where r is near its float64 answer in norm (within this
# many times the norm tolerance): an answer as far from r as r is large is no answer of r's
# (a module that draws other random numbers in float64), and zeros would pass beside it.
NORM_SLACK_LIMIT = 10


def ill_conditioned(r: torch.Tensor, c, atol: float, rtol: float, rel_norm_tol: float,
                    exact, reference_near: float | None = None) -> bool:
    """Whether c, outside the tolerance around r, is within it around the float64 answer
    with r's own error as slack (see CONDITION_FACTOR). Asked only on a failure: the float64
    run costs nothing for a kernel within tolerance. `reference_near`: the largest relative
    norm distance from r to that answer that still grants slack (None: any)."""
    t = exact() if exact else None
    if t is None or t.shape != r.shape:
        return False
    flat = t.reshape(-1)
    exact_sq = ref_off = cand_off = 0.0
    for start, r64, c64 in chunks(r, c):
        t64 = widened(flat[start:start + r64.numel()])
        if not bool((r64.isfinite() & t64.isfinite() & c64.isfinite()).all()):
            return False
        slack = atol + rtol * t64.abs() + CONDITION_FACTOR * (r64 - t64).abs()
        if not bool(((c64 - t64).abs() <= slack).all()):
            return False
        exact_sq += squares(t64)
        ref_off += squares(r64 - t64)
        cand_off += squares(c64 - t64)
    if reference_near is not None and ref_off ** 0.5 > reference_near * exact_sq ** 0.5:
        return False
    return cand_off ** 0.5 <= rel_norm_tol * exact_sq ** 0.5 + CONDITION_FACTOR * ref_off ** 0.5


def within_rounding(err_sq: float, r: torch.Tensor, scale: float) -> bool:
    """Whether the error's RMS is within one unit of rounding in r's dtype (at its scale)."""
    eps = torch.finfo(r.dtype.to_real() if r.is_complex() else r.dtype).eps
    return (err_sq / max(r.numel(), 1)) ** 0.5 <= eps * scale


def near_zero(rel_norm: float, tol: float) -> str:
    return (f"relative error norm {rel_norm:.3g} exceeds {tol:g} "
            "(values are near zero and the answer is not: zeros or garbage?)")


class Float64Answer:
    """The reference's outputs recomputed in float64 (a copy of the model, the inputs widened),
    at the first need and once: only where an output is near rounding noise or fails. `draw_inputs`
    gives the inputs again (trial inputs are redrawn from their seed, not kept)."""

    def __init__(self, model: torch.nn.Module, draw_inputs):
        self.model, self.draw_inputs = model, draw_inputs
        self.outputs: list | None = None
        self.tried = False

    def output(self, k: int) -> torch.Tensor | None:
        if not self.tried:
            self.tried = True
            self.outputs = self.run()
        return self.outputs[k] if self.outputs and k < len(self.outputs) else None

    def run(self) -> list | None:
        """None where the module does not run in float64 (a dtype it insists on, a copy it
        refuses): the guard then holds as it is."""
        try:
            model = copy.deepcopy(self.model).double()
            inputs = [widened(x) if isinstance(x, torch.Tensor) and (x.is_floating_point() or
                                                                    x.is_complex()) else x
                      for x in self.draw_inputs()]
            with torch.no_grad():
                return [widened(o) if o.is_floating_point() or o.is_complex() else o
                        for o in as_tensor_list(model(*inputs))]
        except Exception:
            return None


def squares(x: torch.Tensor) -> float:
    """Sum of squared magnitudes, in x's precision (inf where it overflows: the caller then
    looks closer)."""
    return float(torch.linalg.vector_norm(x)) ** 2


def reference_squares(r: torch.Tensor) -> tuple[float, int]:
    """The sum of squares of the reference's finite values and their count (the absolute
    tolerance's scale is their RMS)."""
    sum_sq, count = 0.0, 0
    flat = r.reshape(-1)
    for start in range(0, flat.numel(), CHUNK):
        piece = flat[start:start + CHUNK]
        total = squares(piece)
        if total != float("inf") and total == total:       # every value finite
            sum_sq, count = sum_sq + total, count + piece.numel()
            continue
        r64 = widened(piece)
        finite = r64[r64.isfinite()]
        sum_sq += squares(finite)
        count += finite.numel()
    return sum_sq, count


class Quick:
    """What the quick pass gathers: maxima and the two norms."""

    def __init__(self):
        self.max_abs = self.max_rel = self.ref_sq = self.err_sq = 0.0

    @property
    def rel_norm(self) -> float:
        return norm_ratio(self.err_sq, self.ref_sq)

    def fill(self, report: Correctness) -> None:
        report.max_abs_error = max(report.max_abs_error or 0.0, self.max_abs)
        report.max_rel_error = max(report.max_rel_error or 0.0, self.max_rel)


def norm_ratio(err_sq: float, ref_sq: float) -> float:
    """||c - r|| / ||r|| from the two sums of squares."""
    ref, err = ref_sq ** 0.5, err_sq ** 0.5
    return err / ref if ref > 0 else (0.0 if err == 0 else float("inf"))


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


# A quantised output (round(x / scale) * scale, an int8 code) that differs by exactly one step
# of its grid where it differs: r / |c - r| and c / |c - r| are both whole numbers. That is a
# rounding that differs from torch's (IEEE division where torch multiplies by a scalar's
# reciprocal, round-half-even against half-away-from-zero, a scale off in its last bit), not a
# wrong formula, and the fix is in the arithmetic, not the tiling: said so.
STEP_GRID = 2 ** 20           # beyond this many steps a value's "whole number" test means nothing
STEP_SLACK = 1e-3


def steps_apart(r64: torch.Tensor, c64: torch.Tensor, diff: torch.Tensor) -> bool:
    """Whether every (r, c) pair here differs by exactly one step of a grid both lie on."""
    if r64.is_complex() or not bool((diff > 0).all() & r64.isfinite().all() & c64.isfinite().all()):
        return False
    for x in (r64 / diff, c64 / diff):
        if not bool(((x - x.round()).abs() <= STEP_SLACK).all() & (x.abs() <= STEP_GRID).all()):
            return False
    return True


def one_step(acc: "ErrorAccumulator") -> str:
    if not (acc.bad and acc.steps_only and acc.step_off_zero):
        return ""
    return (f"; every value outside is off by exactly one step of its quantisation grid "
            f"({acc.bad} value{'s' * (acc.bad != 1)}): the kernel rounds where torch rounds "
            "otherwise (a division written otherwise than torch's: torch divides by a Python "
            "number through its float32 reciprocal on a GPU and exactly on a CPU; "
            "round-half-even against half away from zero; a scale off in its last bit), so the "
            "fix is in the arithmetic, not the tiling")


def worst_part(report: Correctness, r: torch.Tensor) -> str:
    """A complex output's worst element, by the part that differs most: `; worst at [0, 3]:
    imaginary part 0, expected 0.81` (a real part can match while the answer is wrong)."""
    if not (r.is_complex() and report.worst):
        return ""
    w = report.worst[0]
    return f"; worst at {w['index']}: {w['part']} part {w['got']:.6g}, expected {w['expected']:.6g}"


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
        self.worst: list[tuple[float, int, complex, complex]] = []   # complex or float
        self.steps_only = True          # every bad value one grid step off (see one_step)
        # ... and one of them off a value that is not zero: a value left at 0 is always "one
        # step" of a grid as coarse as the value itself, which says nothing about a rounding
        self.step_off_zero = False

    @property
    def rel_norm(self) -> float:
        return norm_ratio(self.err_sq, self.ref_sq)

    def add(self, start, r64, c64, diff, bad, finite) -> None:
        if not diff.numel():
            return
        self.max_abs = max(self.max_abs, float(diff.max()))
        self.max_rel = max(self.max_rel, float((diff / r64.abs().clamp_min(1e-12)).max()))
        self.bad += int(bad.sum())
        if self.steps_only and bad.any():
            self.steps_only = steps_apart(r64[bad], c64[bad], diff[bad])
            self.step_off_zero |= bool(((r64[bad] != 0) & (c64[bad] != 0)).any())
        self.ref_sq += squares(r64[finite])
        self.err_sq += squares(diff[finite])
        if bad.any():
            k = min(5, diff.numel())
            values, index = torch.topk(torch.where(bad, diff, -1.0), k)
            self.worst += [(float(v), start + int(i), c64[i].item(), r64[i].item())
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
                         if shape else [], **values_of(got, expected)}
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


def values_of(got, expected) -> dict:
    """A worst element's got and expected as numbers: a complex one's by the part that differs
    most (its "part" says which), so every reader of the report still sees two numbers."""
    if not isinstance(got, complex) and not isinstance(expected, complex):
        return {"got": got, "expected": expected}
    got, expected = complex(got), complex(expected)
    imaginary = abs(got.imag - expected.imag) > abs(got.real - expected.real)
    if imaginary:
        return {"got": got.imag, "expected": expected.imag, "part": "imaginary"}
    return {"got": got.real, "expected": expected.real, "part": "real"}
