"""Legitimate: both host functions sit in one `extern "C" { ... }` block (a static helper
beside them), the way C headers are written; the loader exposes each of them."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cmath>
#include <cstdint>

extern "C" {

static inline float row_max_of(const float* row, int64_t cols) {
    float m = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) m = std::fmax(m, row[c]);
    return m;
}

void row_max(const float* x, float* m, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) m[r] = row_max_of(x + r * cols, cols);
}

void normalise(const float* x, const float* m, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        float sum = 0.0f;
        for (int64_t c = 0; c < cols; ++c) {
            y[r * cols + c] = std::exp(x[r * cols + c] - m[r]);
            sum += y[r * cols + c];
        }
        for (int64_t c = 0; c < cols; ++c) y[r * cols + c] /= sum;
    }
}

}  // extern "C"
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        cols = x.shape[-1]
        rows = x.numel() // cols
        m = torch.empty(rows, dtype=x.dtype)
        y = torch.empty_like(x)
        kernels.row_max(x, m, rows, cols)
        kernels.normalise(x, m, y, rows, cols)
        return y
