"""Legitimate: the C++ is compiled on the first call to forward (`cpp.load` inside forward)
and the library cached on self for every later call."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cmath>
#include <cstdint>

extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* in = x + r * cols;
        float* out = y + r * cols;
        float m = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) m = std::fmax(m, in[c]);
        float s = 0.0f;
        for (int64_t c = 0; c < cols; ++c) { out[c] = std::exp(in[c] - m); s += out[c]; }
        for (int64_t c = 0; c < cols; ++c) out[c] /= s;
    }
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernels = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kernels is None:
            self.kernels = cpp.load(source)
        x = x.contiguous()
        y = torch.empty_like(x)
        cols = x.shape[-1]
        self.kernels.softmax_rows(x, y, x.numel() // cols, cols)
        return y
