"""The bias + GELU after a bias-free column-parallel linear (GPT-2 / StarCoder MLPs run the
bias add apart when the GEMM is split): bf16, exact erf GELU."""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

# serving sizes; KFORGE_REALWORLD_SHRINK divides them for the CPU (benchmarks/realworld.py)
SHRINK = int(os.environ.get("KFORGE_REALWORLD_SHRINK", "1"))
TOKENS, WIDTH = 4096 // SHRINK, 16384 // SHRINK


class Model(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.bias = nn.Parameter(0.1 * torch.randn(width).to(torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x + self.bias)


def get_inputs():
    return [torch.randn(TOKENS, WIDTH, dtype=torch.bfloat16)]


def get_init_inputs():
    return [WIDTH]
