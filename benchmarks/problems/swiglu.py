"""SwiGLU gate: silu(x W_gate^T) * (x W_up^T), two GEMMs sharing an input."""
import os

import torch
import torch.nn as nn

# Shapes per machine: "cpu" keeps the eager reference at a few milliseconds, "gpu" is a
# realistic size for a data-centre GPU. KFORGE_SIZE picks one (default "cpu").
SIZES = {
    "cpu": dict(batch=128, dim=512, hidden=768),
    "gpu": dict(batch=8192, dim=4096, hidden=11008),
}


def size() -> dict:
    return SIZES[os.environ.get("KFORGE_SIZE", "cpu")]


class Model(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.silu(self.gate(x)) * self.up(x)


def get_inputs():
    s = size()
    return [torch.randn(s["batch"], s["dim"])]


def get_init_inputs():
    s = size()
    return [s["dim"], s["hidden"]]
