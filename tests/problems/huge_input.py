"""Too large on purpose: one 200000 x 200000 float32 input is 160 GB (149 GiB)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def get_inputs():
    return [torch.randn(200000, 200000)]


def get_init_inputs():
    return []
