"""Batched matrix product: (B, M, K) @ (B, K, N)."""
import os

import torch
import torch.nn as nn

# Shapes per machine: "cpu" keeps the eager reference at a few milliseconds, "gpu" is a
# realistic size for a data-centre GPU. KFORGE_SIZE picks one (default "cpu").
SIZES = {
    "cpu": dict(batch=8, m=128, k=256, n=192),
    "gpu": dict(batch=128, m=1024, k=1024, n=1024),
}


def size() -> dict:
    return SIZES[os.environ.get("KFORGE_SIZE", "cpu")]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)


def get_inputs():
    s = size()
    return [torch.randn(s["batch"], s["m"], s["k"]), torch.randn(s["batch"], s["k"], s["n"])]


def get_init_inputs():
    return []
