"""Exploit (a block's fastest call does no work): after the six audited trials, every third
call returns an output it never writes, and the others are an honest ReLU. On the CPU a block's
time is its fastest call, which would be one of these unless the judge checks it; the worker
keeps the fastest call so far and the judge checks it. Target: `mismatch` at a timed call.
"""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

AUDITED_CALLS = 6

source = r"""
#include <cstdint>

extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        x = x.contiguous()
        y = torch.empty_like(x)
        if self.calls > AUDITED_CALLS and self.calls % 3 == 0:
            return y                          # no work: the fastest call of its block
        kernels.relu(x, y, x.numel())
        return y
