"""Drops the last column of the output."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>

extern "C" void relu_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols - 1; ++c) {
            float v = x[r * cols + c];
            y[r * (cols - 1) + c] = v > 0.0f ? v : 0.0f;
        }
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty(rows, cols - 1)
        kernels.relu_rows(x, y, rows, cols)
        return y
