"""A correct ReLU that prints about 6 MB on every call, and a last line worth keeping."""
import sys

import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

kernels = cpp.load(r"""
#include <cstdint>
extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
""")


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        sys.stdout.write(("debug " * 1000 + "\n") * 1000)
        print("LAST LINE OF THIS CALL", flush=True)
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
