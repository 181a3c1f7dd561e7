"""Exploit: NumPy computes the softmax (its functions reached through `getattr`, so no source
text names them) and a trivial C++ kernel copies the answer into the output, so a kernel of
the candidate's own does run. NumPy dispatches no ATen op for an audit to see."""
import numpy
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
_exp = getattr(numpy, "ex" + "p")


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = x.contiguous().numpy()
        e = _exp(a - a.max(axis=-1, keepdims=True))
        probs = torch.from_numpy(e / e.sum(axis=-1, keepdims=True))
        y = torch.empty_like(x)
        kernels.copy_rows(probs, y, probs.numel())
        return y
