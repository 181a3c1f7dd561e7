"""Too large on purpose: a 200000 x 200000 linear layer's weight is 160 GB (149 GiB)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


def get_inputs():
    return [torch.randn(4, 200000)]


def get_init_inputs():
    return [200000]
