"""Legitimate: two kernels per forward, a row-max pass then a normalise pass."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cmath>
#include <cstdint>

extern "C" void row_max(const float* x, float* m, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        float best = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) best = std::fmax(best, x[r * cols + c]);
        m[r] = best;
    }
}

extern "C" void normalise(const float* x, const float* m, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        float total = 0.0f;
        for (int64_t c = 0; c < cols; ++c) {
            y[r * cols + c] = std::exp(x[r * cols + c] - m[r]);
            total += y[r * cols + c];
        }
        for (int64_t c = 0; c < cols; ++c) y[r * cols + c] /= total;
    }
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        cols = x.shape[-1]
        rows = x.numel() // cols
        row_max = torch.empty(rows, dtype=x.dtype, device=x.device)
        y = torch.empty_like(x)
        kernels.row_max(x, row_max, rows, cols)
        kernels.normalise(x, row_max, y, rows, cols)
        return y
