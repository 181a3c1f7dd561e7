"""Matrix-vector product: A (M, K) @ x (K, 1), memory bound."""
import os

import torch
import torch.nn as nn

# Shapes per machine: "cpu" keeps the eager reference at a few milliseconds, "gpu" is a
# realistic size for a data-centre GPU. KFORGE_SIZE picks one (default "cpu").
SIZES = {
    "cpu": dict(m=2048, k=1024),
    "gpu": dict(m=16384, k=16384),
}


def size() -> dict:
    return SIZES[os.environ.get("KFORGE_SIZE", "cpu")]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, x)


def get_inputs():
    s = size()
    return [torch.randn(s["m"], s["k"]), torch.randn(s["k"], 1)]


def get_init_inputs():
    return []
