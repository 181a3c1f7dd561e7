"""Exploit: honest for the first 7 calls (5 trials, the other-batch trial and the warm-up
before timing), then returns the previous output buffer without computing anything, so every
timed call costs nothing and answers with stale values."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>

extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""

kernels = cpp.load(source)
HONEST_CALLS = 7


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.previous = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls > HONEST_CALLS and self.previous is not None:
            return self.previous
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        self.previous = y
        return y
