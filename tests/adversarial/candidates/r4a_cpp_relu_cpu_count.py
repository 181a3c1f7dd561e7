"""Legitimate: `import multiprocessing` only to ask `cpu_count()`, the OpenMP team size the
kernel is given; nothing is started but the kernel's own OpenMP threads inside the call."""
import multiprocessing

import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>

extern "C" void relu(const float* x, float* y, int64_t n, int64_t threads) {
    #pragma omp parallel for num_threads(threads) if(n > 65536)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""

kernels = cpp.load(source)
THREADS = multiprocessing.cpu_count()


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel(), THREADS)
        return y
