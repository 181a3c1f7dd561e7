"""For matmul_row_sum: the algebraic rewrite, y[b] = x[b] · (Σ_o W[o]), the column sums taken
in every call (W's N·K additions, then a matrix-vector product): a fraction of the reference's
2·M·N·K FLOPs, and correct (sums in double)."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>

// colsum[i] = sum_o w[o, i]; y[b] = sum_i x[b, i] * colsum[i]
extern "C" void matmul_row_sum(const float* x, const float* w, double* colsum, float* y,
                               int64_t batch, int64_t in_features, int64_t out_features) {
    for (int64_t i = 0; i < in_features; ++i) colsum[i] = 0.0;
    for (int64_t o = 0; o < out_features; ++o)
        for (int64_t i = 0; i < in_features; ++i)
            colsum[i] += w[o * in_features + i];
    for (int64_t b = 0; b < batch; ++b) {
        double acc = 0.0;
        for (int64_t i = 0; i < in_features; ++i)
            acc += x[b * in_features + i] * colsum[i];
        y[b] = (float)acc;
    }
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        colsum = torch.empty(w.shape[1], dtype=torch.float64)
        y = torch.empty(x.shape[0], 1)
        kernels.matmul_row_sum(x, w, colsum, y, x.shape[0], w.shape[1], w.shape[0])
        return y
