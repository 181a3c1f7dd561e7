"""A correct ReLU that talks: prints on import, on every call, and from the C++ kernel."""
import sys

import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>
#include <cstdio>

extern "C" void relu(const float* x, float* y, int64_t n) {
    std::fprintf(stderr, "relu kernel: %ld elements\n", (long)n);
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""

kernels = cpp.load(source)
print("chatty candidate imported")


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        print("forward called with", tuple(x.shape), file=sys.stderr)
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
