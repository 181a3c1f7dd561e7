"""Row sums that drop the last column: wrong by one value per row, ~1 part in 400."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

kernels = cpp.load(r"""
#include <cstdint>
extern "C" void row_sum_short(const float* x, float* out, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        float acc = 0.0f;
        for (int64_t c = 0; c < cols - 1; ++c) acc += 4.0f * x[r * cols + c];
        out[r] = acc;
    }
}
""")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape[0], dtype=x.dtype)
        kernels.row_sum_short(x, out, x.shape[0], x.shape[1])
        return out
