"""Conv2d (same padding), ReLU, then a learned per-channel bias."""
import os

import torch
import torch.nn as nn

# Shapes per machine: "cpu" keeps the eager reference at a few milliseconds, "gpu" is a
# realistic size for a data-centre GPU. KFORGE_SIZE picks one (default "cpu").
SIZES = {
    "cpu": dict(batch=8, in_channels=3, out_channels=16, height=32, width=32, kernel_size=3),
    "gpu": dict(batch=64, in_channels=64, out_channels=128, height=128, width=128, kernel_size=3),
}


def size() -> dict:
    return SIZES[os.environ.get("KFORGE_SIZE", "cpu")]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x)) + self.bias


def get_inputs():
    s = size()
    return [torch.randn(s["batch"], s["in_channels"], s["height"], s["width"])]


def get_init_inputs():
    s = size()
    return [s["in_channels"], s["out_channels"], s["kernel_size"]]
