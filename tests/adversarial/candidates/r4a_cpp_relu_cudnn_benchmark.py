"""Legitimate: `torch.backends.cudnn.benchmark = True`, a setting copied from a GPU training
script: it only chooses among cuDNN's own algorithms, and changes nothing the verdict rests
on."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

torch.backends.cudnn.benchmark = True

source = r"""
#include <cstdint>

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
