"""Minimum over dimension 1 of a (batch, dim1, dim2) tensor."""
import os

import torch
import torch.nn as nn

# Shapes per machine: "cpu" keeps the eager reference at a few milliseconds, "gpu" is a
# realistic size for a data-centre GPU. KFORGE_SIZE picks one (default "cpu").
SIZES = {
    "cpu": dict(batch=16, dim1=256, dim2=256),
    "gpu": dict(batch=128, dim1=1024, dim2=1024),
}


def size() -> dict:
    return SIZES[os.environ.get("KFORGE_SIZE", "cpu")]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.amin(x, dim=1)


def get_inputs():
    s = size()
    return [torch.randn(s["batch"], s["dim1"], s["dim2"])]


def get_init_inputs():
    return []
