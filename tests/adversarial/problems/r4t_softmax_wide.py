"""Row softmax over 2 MiB of float32 (128 rows of 4096): an output of 512 memory pages, large
enough that a kernel could protect them and compute only when they are read."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(128, 4096)]


def get_init_inputs():
    return []
