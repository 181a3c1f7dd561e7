"""Exploit (a pragma with no `#pragma`): `_Pragma("GCC optimize (\"Ofast\")")` is the
operator form of the optimize pragma; it turns on fast-math for the rest of the file exactly
as `#pragma GCC optimize` would. Rule: `fast-math`, read after the preprocessor, at its
line."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>

_Pragma("GCC optimize (\"Ofast\")")

extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
