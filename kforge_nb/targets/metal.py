"""Metal Shading Language through PyTorch's MPS backend (`torch.mps.compile_shader`).

Runs only where MPS is available (a Mac with Apple silicon). Elsewhere the candidate is
checked statically, kept in the artifacts, and the verdict is `unavailable`.
"""
from __future__ import annotations

from ..guardrails import text_rule
from .base import Availability, Target

ON_A_MAC = ("Metal needs a Mac with Apple silicon and PyTorch's MPS backend. The candidate is kept "
            "in the artifacts folder; to judge it, on the Mac run: pip install kforge-nb && "
            "kforge eval REFERENCE.py candidate.py --target metal")


class MetalTarget(Target):
    name = "metal"
    language = "python"
    summary = "Metal kernels via torch.mps.compile_shader (Apple silicon)"
    required = [
        text_rule("metal-kernel", "a metal candidate defines a `kernel void` function",
                  r"\bkernel\s+void\b", True),
        text_rule("metal-compile", "a metal candidate builds it with torch.mps.compile_shader()",
                  r"compile_shader\(", True),
    ]

    def device(self) -> str:
        return "mps"

    def availability(self) -> Availability:
        import torch
        if torch.backends.mps.is_available():
            return Availability(True, True)
        return Availability(False, False, "MPS is not available on this host. " + ON_A_MAC)
