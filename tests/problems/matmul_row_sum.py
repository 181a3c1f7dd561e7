"""A linear layer whose outputs are summed: the reference spends 2·M·N·K FLOPs, yet the sum
of x @ W.T over its columns is x · (Σ_o W[o]), 2·M·K FLOPs. A correct rewrite runs far
"above" the reference's compute-bound speed of light (tests/test_physics_floor.py)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).sum(dim=-1, keepdim=True)


def get_inputs():
    return [torch.randn(256, 1024)]


def get_init_inputs():
    return [1024, 1024]
