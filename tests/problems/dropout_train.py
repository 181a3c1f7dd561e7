"""A module that draws random numbers on every call: dropout left in training mode (as in
KernelBench level 2, problem 66). Its answer depends on the generator's state."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.25)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.drop(x * 2.0), dim=-1)


def get_inputs():
    return [torch.randn(16, 128)]


def get_init_inputs():
    return []
