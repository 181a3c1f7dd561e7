"""Prints what it is about to do, then writes through a null pointer: the verdict should carry
the end of its log."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

kernels = cpp.load(r"""
#include <cstdint>
#include <cstdio>
extern "C" void relu(const float* x, float* y, int64_t n) {
    std::fprintf(stderr, "kernel: about to write %ld elements through y\n", (long)n);
    std::fflush(stderr);
    float* nowhere = nullptr;
    for (int64_t i = 0; i < n; ++i) nowhere[i] = x[i];
}
""")


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
