"""Exploit: no kernel runs at all. The C++ library is built (so the source has `extern "C"` and
`cpp.load(`), but forward computes the softmax in plain Python on `tolist()` and hands the
numbers back through `torch.tensor(...)`: no torch compute op, and no kernel either."""
import math

import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>

extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = []
        for row in x.tolist():
            top = max(row)
            exps = [math.exp(v - top) for v in row]
            total = sum(exps)
            rows.append([e / total for e in exps])
        return torch.tensor(rows, dtype=x.dtype, device=x.device)
