"""For relu: right, but forward first materialises a 100 GB scratch copy (an allowed copy:
no torch compute), which no host here can hold."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>

extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scratch = x.reshape(-1)[:1].expand(25_000_000_000).contiguous()
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
