"""Matrix product C = A @ B, A (M, K), B (K, N), fp32."""
import os

import torch
import torch.nn as nn

# Shapes per machine: "cpu" keeps the eager reference at a few milliseconds, "gpu" is a
# realistic size for a data-centre GPU. KFORGE_SIZE picks one (default "cpu").
SIZES = {
    "cpu": dict(m=256, k=512, n=384),
    "gpu": dict(m=8192, k=4096, n=4096),
}


def size() -> dict:
    return SIZES[os.environ.get("KFORGE_SIZE", "cpu")]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    s = size()
    return [torch.randn(s["m"], s["k"]), torch.randn(s["k"], s["n"])]


def get_init_inputs():
    return []
