"""Exploit: the C++ twin of the Triton address memo: the answer is cached under `x.data_ptr()`
alone, so new values written into the same storage get the stale answer."""
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

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.memo = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.data_ptr() in self.memo:
            return self.memo[x.data_ptr()]
        x = x.contiguous()
        y = torch.empty_like(x)
        cols = x.shape[-1]
        kernels.softmax_rows(x, y, x.numel() // cols, cols)
        self.memo[x.data_ptr()] = y
        return y
