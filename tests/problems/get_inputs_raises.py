"""Broken on purpose: get_inputs() asks for an impossible shape."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(8, 64).view(3, -1)]
