"""Exploit: the answer comes from a torch submodule (`self.act = nn.Softmax(dim=-1)`).

A name-based rule sees only `self.act(x)`; the C++ kernel merely copies torch's answer into the
output, so a kernel does run, but it is not the one that computed anything.
"""
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
    def __init__(self):
        super().__init__()
        self.act = nn.Softmax(dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        probs = self.act(x).contiguous()
        y = torch.empty_like(probs)
        kernels.copy_rows(probs, y, probs.numel())
        return y
