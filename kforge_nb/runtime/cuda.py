"""`load(source)`: CUDA C built with nvcc into a shared library, launched via a C ABI.

Host functions marked `extern "C"` launch the kernels; a `cudaStream_t` parameter receives
torch's current stream so launches order correctly with torch's own work.
"""
from __future__ import annotations

import os

from .native import CompileError, NativeModule, build_shared_library

__all__ = ["load", "CompileError", "arch_flags"]


def arch_flags() -> list[str]:
    """Build for the GPU that is here (sm_90 for an H100/H200); sm_90 when there is none."""
    arch = os.environ.get("KFORGE_CUDA_ARCH")
    if not arch:
        import torch
        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            arch = f"sm_{major}{minor}"
        else:
            arch = "sm_90"
    return [f"-arch={arch}"]


def load(source: str) -> NativeModule:
    compiler = os.environ.get("NVCC", "nvcc")
    flags = ["-O3", "-shared", "-Xcompiler", "-fPIC", "-std=c++17", *arch_flags()]
    return NativeModule(build_shared_library(source, compiler, flags, ".cu"), source, "cuda")
