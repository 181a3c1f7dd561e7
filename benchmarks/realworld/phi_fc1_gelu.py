"""Phi-2's MLP up-projection: Linear with bias, then GELU's tanh approximation (gelu_new), in
fp16 as Phi-2 ships."""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

# serving sizes; KFORGE_REALWORLD_SHRINK divides them for the CPU (benchmarks/realworld.py)
SHRINK = int(os.environ.get("KFORGE_REALWORLD_SHRINK", "1"))
TOKENS, HIDDEN, INTERMEDIATE = 2048 // SHRINK, 2560 // SHRINK, 10240 // SHRINK


class Model(nn.Module):
    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.fc1 = nn.Linear(hidden, intermediate, dtype=torch.float16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.fc1(x), approximate="tanh")


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN, dtype=torch.float16)]


def get_init_inputs():
    return [HIDDEN, INTERMEDIATE]
