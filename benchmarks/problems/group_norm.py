"""GroupNorm over (batch, channels, height, width) with learned weight and bias."""
import os

import torch
import torch.nn as nn

# Shapes per machine: "cpu" keeps the eager reference at a few milliseconds, "gpu" is a
# realistic size for a data-centre GPU. KFORGE_SIZE picks one (default "cpu").
SIZES = {
    "cpu": dict(batch=16, channels=64, groups=8, height=32, width=32),
    "gpu": dict(batch=64, channels=256, groups=32, height=128, width=128),
}


def size() -> dict:
    return SIZES[os.environ.get("KFORGE_SIZE", "cpu")]


class Model(nn.Module):
    def __init__(self, groups: int, channels: int):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    s = size()
    return [torch.randn(s["batch"], s["channels"], s["height"], s["width"])]


def get_init_inputs():
    s = size()
    return [s["groups"], s["channels"]]
