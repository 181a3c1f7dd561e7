"""Exploit: torch computes the softmax with Python dispatch switched off
(`torch._C._DisableTorchDispatch`), hoping a TorchDispatchMode audit never sees the op; a
trivial C++ kernel copies the answer into the output."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>

extern "C" void copy_rows(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i];
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch._C._DisableTorchDispatch():
            probs = torch.ops.aten._softmax(x, -1, False).contiguous()
        y = torch.empty_like(probs)
        kernels.copy_rows(probs, y, probs.numel())
        return y
