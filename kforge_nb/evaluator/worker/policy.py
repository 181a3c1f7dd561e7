"""The reference as a user would run it under a precision policy: a timing baseline, never a truth.

The trials always compare against the reference in full fp32: that stays the answer. But a
candidate that may compute in bf16 is not fairly judged against fp32 eager alone (cuBLAS in bf16
is several times faster too). So under tf32, bf16 or fp16 the judge also times the reference the
way a user would run it under that policy:

* tf32: the fp32 model with TF32 allowed in cuBLAS and cuDNN (float32 matmul precision "high").
  The CPU has no TF32: there the policy's figures are the fp32 ones, and the label says so.
* bf16, fp16: the fp32 model under `torch.autocast` (what a user reaches for; a model cast with
  `.half()` would be another model). On the CPU fp16 is not timed: most CPUs have no fp16
  arithmetic, and a baseline slower than fp32 would only flatter the candidate.

Global switches are set for one timed block and restored after it: the judge serves several
requests, and its trials stay strict.
"""
from __future__ import annotations

import contextlib
import warnings

import torch

AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}


def describe(policy: str, device: str) -> dict:
    """What the judge times as this policy's baseline here: {"label", "timed"}, plus
    "same_as_fp32" where the policy changes nothing on this device. {} under strict."""
    if policy == "tf32":
        if device == "cuda":
            return {"label": "tf32 (TF32 in cuBLAS and cuDNN)", "timed": True}
        return {"label": f"tf32 (no TF32 on the {device.upper()}: the fp32 figures)",
                "timed": False, "same_as_fp32": True}
    if policy not in AUTOCAST:
        return {}
    label = f"{policy} (autocast)"
    if policy == "fp16" and device == "cpu":
        return {"label": f"{label} not timed: most CPUs have no fp16 arithmetic, so fp16 "
                         "autocast there runs slower than fp32 and would only flatter the "
                         "candidate; compare with the fp32 figures", "timed": False}
    if not autocast_takes(device, AUTOCAST[policy]):
        return {"label": f"{label} not timed: this torch's {device} autocast does not run "
                         f"{policy}", "timed": False}
    return {"label": label, "timed": True}


def autocast_takes(device: str, dtype: torch.dtype) -> bool:
    """Whether autocast really runs `dtype` on `device` (an unsupported one disables itself
    with a warning: timing that would be fp32 under another name)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with torch.autocast(device, dtype=dtype):
                return torch.is_autocast_enabled(device) and \
                    torch.get_autocast_dtype(device) == dtype
        except (RuntimeError, ValueError):
            return False


@contextlib.contextmanager
def running_under(policy: str, device: str):
    """The policy's switches around one timed block (or one baseline measurement); every
    global flag is back as it was afterwards, exception or not."""
    if policy == "tf32" and device == "cuda":
        saved = (torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32,
                 torch.backends.cudnn.allow_tf32)
        torch.set_float32_matmul_precision("high")
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        try:
            yield
        finally:   # the precision first: setting it also sets allow_tf32
            torch.set_float32_matmul_precision(saved[0])
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[1:]
    elif policy in AUTOCAST:
        with torch.autocast(device, dtype=AUTOCAST[policy]):
            yield
    else:
        yield
