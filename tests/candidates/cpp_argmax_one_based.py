"""For argmax_rows: off by one, it writes 1-based indices."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>

extern "C" void argmax_rows(const float* x, int64_t* out, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        int64_t best = 0;
        for (int64_t c = 1; c < cols; ++c)
            if (x[r * cols + c] > x[r * cols + best]) best = c;
        out[r] = best + 1;
    }
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty(x.shape[0], dtype=torch.int64)
        kernels.argmax_rows(x, out, x.shape[0], x.shape[1])
        return out
