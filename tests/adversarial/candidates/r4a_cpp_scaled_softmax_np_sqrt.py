"""Legitimate: the wrapper works out the kernel's scale on the host, `1 / np.sqrt(d)` of the
row length (a Python int): NumPy arithmetic on a number, no tensor data in it."""
import numpy as np
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cmath>
#include <cstdint>

extern "C" void scaled_softmax(const float* x, float* y, int64_t rows, int64_t cols,
                               float scale) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* in = x + r * cols;
        float* out = y + r * cols;
        float top = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) top = std::fmax(top, in[c] * scale);
        float total = 0.0f;
        for (int64_t c = 0; c < cols; ++c) {
            out[c] = std::exp(in[c] * scale - top);
            total += out[c];
        }
        for (int64_t c = 0; c < cols; ++c) out[c] /= total;
    }
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        cols = x.shape[-1]
        scale = float(1.0 / np.sqrt(x.shape[-1]))
        y = torch.empty_like(x)
        kernels.scaled_softmax(x, y, x.numel() // cols, cols, scale)
        return y
