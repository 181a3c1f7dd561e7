"""Legitimate: parameters spelled the way C++ style guides ask: `std::int64_t`,
`std::size_t`, `std::int32_t` and `const float* __restrict__`."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstddef>
#include <cstdint>

extern "C" void relu(const float* __restrict__ x, float* __restrict__ y, std::int64_t n,
                     std::size_t chunk, std::int32_t unused) {
    (void)unused;
    for (std::int64_t start = 0; start < n; start += static_cast<std::int64_t>(chunk)) {
        const std::int64_t end = start + static_cast<std::int64_t>(chunk) < n
                                 ? start + static_cast<std::int64_t>(chunk) : n;
        for (std::int64_t i = start; i < end; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
    }
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel(), 256, 0)
        return y
