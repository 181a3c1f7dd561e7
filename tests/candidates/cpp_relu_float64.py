"""Right values, wrong dtype: writes float64 where the reference returns float32."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>

extern "C" void relu(const float* x, double* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0;
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty(x.shape, dtype=torch.float64)
        kernels.relu(x, y, x.numel())
        return y
