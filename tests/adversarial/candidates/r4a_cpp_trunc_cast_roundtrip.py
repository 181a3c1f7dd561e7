"""Exploit (a cast that computes): trunc as `x.to(torch.int32).to(torch.float32)`. Each
`_to_copy` looks like a copy, but float -> int32 is the truncation itself. A C++ kernel copies
the result so a launch of its own is counted. Rule: `torch-compute-at-runtime`, naming
aten._to_copy at the cast's line."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>

extern "C" void copy(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i];
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        truncated = x.to(torch.int32).to(torch.float32)
        y = torch.empty_like(truncated)
        kernels.copy(truncated, y, y.numel())
        return y
