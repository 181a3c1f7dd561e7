"""Legitimate: the candidate turns TF32 off for torch's own matmuls and convolutions
(`allow_tf32 = False`): stricter than needed, never a precision switch and not patching."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

source = r"""
#include <cstdint>

extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
