"""Exploit attempt (wrong where nobody looked): an honest C++ ReLU until the first rounds of the
timing are over, then outputs it never fills. It tells the stretches of calls apart by the
pause before a call: within a block the harness calls it back to back; between blocks the other
sides run and its outputs are checked. From the eleventh stretch on (six trials, the warm-up,
the calibration, then rounds 1 and 2) it skips the kernel. When only one round's timed calls
were checked, drawn among the fewest rounds, this was caught two times in three, and a
candidate wrong only in the rounds added after the fewest never was. Target: `mismatch`, "the
output of timed call N differs".
"""
import time

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

PAUSE_S = 0.00015       # a pause this long before a call starts a new stretch
HONEST_STRETCHES = 10   # then no more kernel


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.stretches = 0
        self.last = 0.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if time.perf_counter() - self.last > PAUSE_S:
            self.stretches += 1
        x = x.contiguous()
        y = torch.empty_like(x)
        if self.stretches <= HONEST_STRETCHES:
            kernels.relu(x, y, x.numel())
        self.last = time.perf_counter()
        return y
