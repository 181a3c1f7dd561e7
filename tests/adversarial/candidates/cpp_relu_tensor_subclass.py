"""Exploit: returns a torch.Tensor subclass. A subclass can override `__eq__`, `allclose`,
`__torch_function__`... and so lie about its values to whatever compares them."""
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


class Answer(torch.Tensor):
    """Looks like a tensor; a real exploit would override comparisons here."""


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y.as_subclass(Answer)
