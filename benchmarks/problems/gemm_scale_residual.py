"""GEMM, scaled, plus its input as a residual: x + scale * linear(x) (square layer)."""
import os

import torch
import torch.nn as nn

# Shapes per machine: "cpu" keeps the eager reference at a few milliseconds, "gpu" is a
# realistic size for a data-centre GPU. KFORGE_SIZE picks one (default "cpu").
SIZES = {
    "cpu": dict(batch=128, features=512),
    "gpu": dict(batch=8192, features=8192),
}


def size() -> dict:
    return SIZES[os.environ.get("KFORGE_SIZE", "cpu")]


class Model(nn.Module):
    def __init__(self, features: int, scale: float = 0.5):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.scale * self.linear(x)


def get_inputs():
    s = size()
    return [torch.randn(s["batch"], s["features"])]


def get_init_inputs():
    s = size()
    return [s["features"]]
