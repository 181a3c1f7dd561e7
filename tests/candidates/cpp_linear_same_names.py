"""For linear: same parameter names as the reference (`linear.weight`, `linear.bias`) but zero
initialised, so it is only correct if the evaluator copies the reference's weights in."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>

// y[b, o] = bias[o] + sum_i x[b, i] * w[o, i]
extern "C" void linear(const float* x, const float* w, const float* bias, float* y,
                       int64_t batch, int64_t in_features, int64_t out_features) {
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t o = 0; o < out_features; ++o) {
            float acc = bias[o];
            for (int64_t i = 0; i < in_features; ++i)
                acc += x[b * in_features + i] * w[o * in_features + i];
            y[b * out_features + o] = acc;
        }
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w, b = self.linear.weight.contiguous(), self.linear.bias.contiguous()
        y = torch.empty(x.shape[0], w.shape[0])
        kernels.linear(x, w, b, y, x.shape[0], w.shape[1], w.shape[0])
        return y
