"""Outputs around 1e-6: each element is within atol of zero; only the norm guard catches zeros."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 1e-6


def get_inputs():
    return [torch.randn(8, 64)]


def get_init_inputs():
    return []
