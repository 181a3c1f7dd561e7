"""RMSNorm over the last dimension: x / sqrt(mean(x^2) + eps) * weight."""
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
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim) * 0.1 + 1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * rms * self.weight


def get_inputs():
    s = size()
    return [torch.randn(s["batch"], s["dim"])]


def get_init_inputs():
    s = size()
    return [s["dim"]]
