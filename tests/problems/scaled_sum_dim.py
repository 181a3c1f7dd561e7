"""Forward arguments that are not tensors: an int `dim`, a float `scale`, a bool `keepdim`
(KernelBench passes ints such as `dim` through get_inputs). Each is passed to forward as is."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor, dim: int, scale: float, keepdim: bool) -> torch.Tensor:
        return (x * scale).sum(dim=dim, keepdim=keepdim)


def get_inputs():
    return [torch.randn(8, 16), 1, 0.5, True]


def get_init_inputs():
    return []
