"""For tiny_scale: the scale is stored in an int, so it truncates to 0 and every output is 0."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>

extern "C" void scale(const float* x, float* y, int64_t n) {
    const int factor = 1e-6;
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * factor;
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.scale(x, y, x.numel())
        return y
