"""Claims to be Triton but has no @triton.jit kernel: plain Python loops instead."""
import torch
import torch.nn as nn


def add_rows(x, y, out):
    for i in range(x.shape[0]):
        out[i] = x[i] + y[i]


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        add_rows(x, y, out)
        return out
