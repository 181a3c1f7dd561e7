"""Linear layer, sigmoid, then the sum over features: one number per row."""
import os

import torch
import torch.nn as nn

# Shapes per machine: "cpu" keeps the eager reference at a few milliseconds, "gpu" is a
# realistic size for a data-centre GPU. KFORGE_SIZE picks one (default "cpu").
SIZES = {
    "cpu": dict(batch=128, in_features=512, out_features=256),
    "gpu": dict(batch=8192, in_features=8192, out_features=8192),
}


def size() -> dict:
    return SIZES[os.environ.get("KFORGE_SIZE", "cpu")]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.linear(x)).sum(dim=1, keepdim=True)


def get_inputs():
    s = size()
    return [torch.randn(s["batch"], s["in_features"])]


def get_init_inputs():
    s = size()
    return [s["in_features"], s["out_features"]]
