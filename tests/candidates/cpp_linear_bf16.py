"""For linear: a bf16 GEMM as a bf16 kernel computes it (inputs and weights rounded to bfloat16,
products summed in fp32, bias added in fp32). Off the fp32 reference by ~0.3%: a mismatch under
the strict policy, correct under --precision bf16."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>
#include <cstring>

// v rounded to the nearest bfloat16 (ties to even), as torch rounds to bfloat16
static inline float bf16(float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    std::memcpy(&v, &u, 4);
    return v;
}

// y[b, o] = bias[o] + sum_i bf16(x[b, i]) * bf16(w[o, i])
extern "C" void linear_bf16(const float* x, const float* w, const float* bias, float* y,
                            int64_t batch, int64_t in_features, int64_t out_features) {
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t o = 0; o < out_features; ++o) {
            float acc = 0.0f;
            for (int64_t i = 0; i < in_features; ++i)
                acc += bf16(x[b * in_features + i]) * bf16(w[o * in_features + i]);
            y[b * out_features + o] = acc + bias[o];
        }
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w, b = self.linear.weight.contiguous(), self.linear.bias.contiguous()
        y = torch.empty(x.shape[0], w.shape[0])
        kernels.linear_bf16(x, w, b, y, x.shape[0], w.shape[1], w.shape[0])
        return y
