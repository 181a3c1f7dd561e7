"""Softmax over one row of 2**24 positions, scores of small spread: every value is ~6e-8 (RMS
below float32's rounding unit at scale 1; no float row of 2**23 or fewer gets there, its mean
alone is 2**-23), yet the answer is far from zero: it sums to 1."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(1, 1 << 24) * 0.25]


def get_init_inputs():
    return []
