"""Broken on purpose: the class is misnamed, so there is no `Model`."""
import torch
import torch.nn as nn


class MyModel(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(8, 64)]
