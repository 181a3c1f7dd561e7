"""Compare candidate outputs with reference outputs. Runs in the parent, never near candidate code.

Tolerances come from one table keyed by precision policy and dtype. Besides the elementwise
test |c - r| <= atol·scale + rtol·|r|, the relative norm ||c - r|| / ||r|| must be small, so an
output of near-zero values cannot pass by answering zeros.

`scale` is the reference's RMS when that exceeds 1: a sum of K products of size ~s lands near
s·sqrt(K), and any other summation order (another GEMM blocking, a tree reduction) differs from
it by rounding on that scale. Elements near zero in such an output cannot be held to an absolute
1e-4; the relative-norm guard still holds the whole output to 1e-4.
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
    parts = [f"trial seed {trial['seed']}"]
    if trial.get("distribution", "given") != "given":
        parts.append(f"{trial['distribution']} inputs")
    if trial.get("batch"):
        parts.append(f"batch size changed to {trial['batch']}")
    return ", ".join(parts)


def check_trials(ref_trials: list[dict], cand_trials: list[dict], policy: str) -> tuple[bool, str, Correctness]:
    """Every trial must match; report the first failure in full, or the worst pass."""
    report = Correctness(trials=len(ref_trials))
    judged = [t for t in ref_trials if "skipped" not in t]
    for ref, cand in zip(judged, cand_trials):
        for i, (before, after) in enumerate(zip(ref["inputs"], cand["inputs_after"])):
            if isinstance(before, torch.Tensor) and not torch.equal(before, after):
                report.failed_check = describe(ref)
                return False, f"input {i} was modified in place ({describe(ref)})", report
        ok, message = compare_outputs(ref["outputs"], cand["outputs"], policy, report)
        if not ok:
            report.failed_check = describe(ref)
            return False, f"{message} ({describe(ref)})", report
        report.passed_trials += 1
    return True, f"matches the reference on {report.passed_trials} trials", report


def compare_outputs(refs: list, cands: list, policy: str, report: Correctness) -> tuple[bool, str]:
    if len(refs) != len(cands):
        return False, f"returned {len(cands)} outputs, the reference returns {len(refs)}"
    for k, (r, c) in enumerate(zip(refs, cands)):
        name = f"output {k}" if len(refs) > 1 else "output"
        report.shape, report.dtype = list(r.shape), str(r.dtype).replace("torch.", "")
        if c.shape != r.shape:
            return False, f"{name} has shape {tuple(c.shape)}, expected {tuple(r.shape)}"
        if c.dtype != r.dtype:
            return False, f"{name} has dtype {c.dtype}, expected {r.dtype}"
        ok, message = compare_values(r, c, policy, report)
        if not ok:
            return False, f"{name}: {message}"
    return True, ""


def compare_values(r: torch.Tensor, c: torch.Tensor, policy: str, report: Correctness) -> tuple[bool, str]:
    atol, rtol, rel_norm_tol = tolerance(r.dtype, policy)
    report.tolerance = {"atol": atol, "rtol": rtol, "rel_norm": rel_norm_tol, "policy": policy}
    if not (r.is_floating_point() or r.is_complex()):
        bad = c != r
        fill_errors(report, r.double(), c.double(), bad)
        return (not bad.any().item()), f"{int(bad.sum())} of {r.numel()} values differ"

    r64, c64 = r.double(), c.double()
    same_nonfinite = (r64.isnan() & c64.isnan()) | (r64.isinf() & (r64 == c64))
    diff = (c64 - r64).abs().masked_fill(same_nonfinite, 0.0)
    diff = torch.where(diff.isnan(), torch.full_like(diff, float("inf")), diff)
    finite_ref = r64[~same_nonfinite]
    scale = max(1.0, finite_ref.pow(2).mean().sqrt().item()) if finite_ref.numel() else 1.0
    report.tolerance["atol_scaled"] = atol * scale
    bad = diff > atol * scale + rtol * r64.abs().masked_fill(same_nonfinite, 0.0)
    fill_errors(report, r64, c64, bad, diff)

    finite = ~same_nonfinite
    ref_norm = r64[finite].norm().item() if finite.any() else 0.0
    err_norm = diff[finite].norm().item() if finite.any() else 0.0
    rel_norm = err_norm / ref_norm if ref_norm > 0 else (0.0 if err_norm == 0 else float("inf"))
    report.rel_norm_error = max(report.rel_norm_error or 0.0, rel_norm)
    if bad.any():
        return False, (f"{report.mismatch_fraction:.2%} of values outside atol={atol * scale:.3g}, "
                       f"rtol={rtol:g}; max abs error {report.max_abs_error:.3g}")
    if rel_norm > rel_norm_tol:
        return False, (f"relative error norm {rel_norm:.3g} exceeds {rel_norm_tol:g} "
                       "(values are near zero and the answer is not: zeros or garbage?)")
    return True, ""


def fill_errors(report: Correctness, r: torch.Tensor, c: torch.Tensor, bad: torch.Tensor,
                diff: torch.Tensor | None = None) -> None:
    diff = (c - r).abs() if diff is None else diff
    if diff.numel() == 0:
        return
    rel = diff / r.abs().clamp_min(1e-12)
    report.max_abs_error = max(report.max_abs_error or 0.0, float(diff.max()))
    report.max_rel_error = max(report.max_rel_error or 0.0, float(rel.max()))
    report.mismatch_fraction = float(bad.double().mean())
    if bad.any():
        flat = diff.flatten()
        worst = torch.topk(flat, min(5, flat.numel())).indices
        report.worst = [{"index": list(map(int, torch.unravel_index(i, diff.shape))) if diff.dim() else [],
                         "got": float(c.flatten()[i]), "expected": float(r.flatten()[i])}
                        for i in worst]
        report.error_map = error_map(diff)


def error_map(diff: torch.Tensor, size: int = 64) -> dict:
    """|c - r| max-pooled to at most size×size (2-D) or size bins (1-D), for a heat map."""
    d = diff.float()
    d = torch.where(d.isinf(), torch.full_like(d, float(d[~d.isinf()].max()) if (~d.isinf()).any() else 1.0), d)
    if d.dim() == 0:
        d = d.reshape(1)
    if d.dim() == 1:
        pooled = torch.nn.functional.adaptive_max_pool1d(d[None, None], min(size, d.numel()))[0, 0]
        return {"kind": "1d", "values": pooled.tolist(), "shape": list(diff.shape)}
    d2 = d.reshape(-1, d.shape[-1])
    pooled = torch.nn.functional.adaptive_max_pool2d(
        d2[None, None], (min(size, d2.shape[0]), min(size, d2.shape[1])))[0, 0]
    return {"kind": "2d", "values": pooled.tolist(), "shape": list(diff.shape)}
