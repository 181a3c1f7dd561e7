"""For softmax_16m: answers zeros. Every softmax value over 2**24 positions is ~1e-7, so each
zero is within atol of its answer, and the whole error's RMS is below float32's rounding unit
at scale 1: the relative-norm guard used to be waived there, and zeros passed as `correct`."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>

extern "C" void fill_zeros(float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = 0.0f;
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        kernels.fill_zeros(y, y.numel())
        return y
