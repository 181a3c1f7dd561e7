"""A product of two input matrices (192 x 192): bilinear, so a product of inputs each scaled by
a factor is the product scaled by both factors."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


def get_inputs():
    return [torch.randn(192, 192), torch.randn(192, 192)]


def get_init_inputs():
    return []
