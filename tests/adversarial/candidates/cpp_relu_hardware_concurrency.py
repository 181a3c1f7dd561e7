"""Legitimate: the C++ asks how many hardware threads there are
(`std::thread::hardware_concurrency()`, a query that starts nothing) to size its OpenMP team.
Starting a std::thread is banned; asking this question is not."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <algorithm>
#include <cstdint>
#include <thread>

extern "C" void relu(const float* x, float* y, int64_t n) {
    const int hw = static_cast<int>(std::thread::hardware_concurrency());
    const int teams = std::max(1, std::min(hw, static_cast<int>(n / 4096) + 1));
    #pragma omp parallel for num_threads(teams) schedule(static)
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
