"""Broken on purpose: Model's constructor rejects the argument get_init_inputs() gives it."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        if width % 8:
            raise ValueError(f"width must be a multiple of 8, got {width}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(8, 64)]


def get_init_inputs():
    return [12]
