"""Legitimate: a workspace (per-row max and sum) allocated once in __init__ and reused by every
call, grown only if a batch needs more rows; the output is allocated fresh each call."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cmath>
#include <cstdint>

// work holds 2 floats per row: the row's max, then its sum of exponentials.
extern "C" void softmax_rows(const float* x, float* y, float* work, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        work[2 * r] = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) work[2 * r] = std::fmax(work[2 * r], x[r * cols + c]);
        work[2 * r + 1] = 0.0f;
        for (int64_t c = 0; c < cols; ++c) {
            y[r * cols + c] = std::exp(x[r * cols + c] - work[2 * r]);
            work[2 * r + 1] += y[r * cols + c];
        }
        for (int64_t c = 0; c < cols; ++c) y[r * cols + c] /= work[2 * r + 1];
    }
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.work = torch.empty(2 * 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        cols = x.shape[-1]
        rows = x.numel() // cols
        if self.work.numel() < 2 * rows:
            self.work = torch.empty(2 * rows)
        y = torch.empty_like(x)
        kernels.softmax_rows(x, y, self.work, rows, cols)
        return y
