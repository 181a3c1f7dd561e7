"""Legitimate: the loaded library is an attribute called `self.softmax`, and its kernels are
called `amax`, `exp` and `div`, the names of torch ops. Every one of them is C++."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>

// No <cmath>: these C functions are named exp and div themselves; the builtins do the maths.

extern "C" void amax(const float* x, float* m, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        float best = -__builtin_inff();
        for (int64_t c = 0; c < cols; ++c) best = __builtin_fmaxf(best, x[r * cols + c]);
        m[r] = best;
    }
}

extern "C" void exp(const float* x, const float* m, float* y, float* s, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        float total = 0.0f;
        for (int64_t c = 0; c < cols; ++c) {
            y[r * cols + c] = __builtin_expf(x[r * cols + c] - m[r]);
            total += y[r * cols + c];
        }
        s[r] = total;
    }
}

extern "C" void div(float* y, const float* s, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) y[r * cols + c] /= s[r];
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.softmax = cpp.load(source)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        cols = x.shape[-1]
        rows = x.numel() // cols
        y = torch.empty_like(x)
        row_max = torch.empty(rows, dtype=x.dtype)
        row_sum = torch.empty(rows, dtype=x.dtype)
        self.softmax.amax(x, row_max, rows, cols)
        self.softmax.exp(x, row_max, y, row_sum, rows, cols)
        self.softmax.div(y, row_sum, rows, cols)
        return y
