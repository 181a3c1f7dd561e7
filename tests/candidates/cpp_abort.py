"""The kernel's own sanity check calls abort() on every real input."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>
#include <cstdlib>

extern "C" void relu(const float* x, float* y, int64_t n) {
    if (n % 1024 != 0) std::abort();   // "only whole blocks", wrongly assumed
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
