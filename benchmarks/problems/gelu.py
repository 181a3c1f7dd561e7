"""GELU (the exact, erf-based form), elementwise."""
import os

import torch
import torch.nn as nn

# Shapes per machine: "cpu" keeps the eager reference at a few milliseconds, "gpu" is a
# realistic size for a data-centre GPU. KFORGE_SIZE picks one (default "cpu").
SIZES = {
    "cpu": dict(batch=64, dim=4096),
    "gpu": dict(batch=4096, dim=16384),
}


def size() -> dict:
    return SIZES[os.environ.get("KFORGE_SIZE", "cpu")]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.gelu(x)


def get_inputs():
    s = size()
    return [torch.randn(s["batch"], s["dim"])]


def get_init_inputs():
    return []
