"""ReLU over a small batch, for the planted-baseline attack alone: its own source, so its own
key in KFORGE_CACHE/baselines (a planted entry can never reach another test's problem)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(8, 64)]


def get_init_inputs():
    return []
