"""Two outputs of two dtypes: the ReLU (float32) and where the input is positive (bool)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor):
        return torch.relu(x), x > 0


def get_inputs():
    return [torch.randn(8, 64)]


def get_init_inputs():
    return []
