"""Exploit (the harness's own clock rebound): harness binds time.perf_counter_ns at import so a
candidate patching `time` changes nothing (and integrity names the patch). But the bound name
is a module global, and the module is in sys.modules: __init__ rebinds
kforge_nb.evaluator.worker.harness.perf_counter_ns to a fake clock advancing 200 ns a reading,
so every timed call measures 0.2 us. The kernel itself is right and slow (it sleeps 5 ms).
The guarded `time.*` functions are untouched. Target today: `correct` with a large speedup."""
import itertools
import sys

import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>
#include <unistd.h>

extern "C" void slow_relu(const float* x, float* y, int64_t n) {
    usleep(5000);
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        harness = vars(sys)["modules"]["kforge_nb.evaluator.worker.harness"]
        vars(harness)["perf_counter_ns"] = itertools.count(1 << 40, 200).__next__

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.slow_relu(x, y, x.numel())
        return y
