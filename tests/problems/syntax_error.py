"""Broken on purpose: a missing colon on the forward line."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x)
        return torch.relu(x)


def get_inputs():
    return [torch.randn(8, 64)]
