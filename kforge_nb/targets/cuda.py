"""CUDA C: kernels plus `extern "C"` launchers, built by nvcc into a shared library.

Without a GPU the source is still compiled where nvcc is present, so compile errors are
reported; a candidate that builds is then `unavailable`, not judged.
"""
from __future__ import annotations

import os
import shutil

from ..guardrails import text_rule
from .base import Availability, Target


class CudaTarget(Target):
    name = "cuda"
    language = "python"
    summary = "CUDA C kernels launched through a C-ABI shared library built by nvcc"
    required = [
        text_rule("cuda-kernel", "a cuda candidate defines a __global__ kernel", r"__global__",
                  True),
        text_rule("cuda-load", "a cuda candidate builds its source with cuda.load() "
                  "(or torch's load_inline)", r"\bcuda\.load\(|load_inline\(", True),
    ]

    def device(self) -> str:
        return "cuda"

    def availability(self) -> Availability:
        import torch
        nvcc = shutil.which(os.environ.get("NVCC", "nvcc")) is not None
        if torch.cuda.is_available():
            if not nvcc:
                return Availability(False, False, "a GPU is here but nvcc is not on the PATH; "
                                    "install the CUDA toolkit or set NVCC")
            return Availability(True, True)
        reason = "no CUDA GPU on this machine: run `kforge eval REF CAND --target cuda` on a GPU host"
        if nvcc:
            return Availability(False, True, reason + " (the source was compiled with nvcc here)")
        return Availability(False, False, reason + "; nvcc is not here either, so it was not compiled")
