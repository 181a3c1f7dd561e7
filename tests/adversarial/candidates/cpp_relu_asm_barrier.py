"""Honest: a ReLU with an inline asm compiler barrier after its loop (an asm statement, not an
asm label renaming a declaration): the interpreter-access rule must not fire."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>

extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
    asm volatile("" ::: "memory");
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
