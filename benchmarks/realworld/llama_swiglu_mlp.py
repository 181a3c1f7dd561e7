"""Llama 3 8B's MLP: down(silu(gate(x)) * up(x)), bf16 weights without bias, a prefill batch
of tokens."""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

# serving sizes; KFORGE_REALWORLD_SHRINK divides them for the CPU (benchmarks/realworld.py)
SHRINK = int(os.environ.get("KFORGE_REALWORLD_SHRINK", "1"))
TOKENS, HIDDEN, INTERMEDIATE = 2048 // SHRINK, 4096 // SHRINK, 14336 // SHRINK


class Model(nn.Module):
    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        linear = lambda i, o: nn.Linear(i, o, bias=False, dtype=torch.bfloat16)  # noqa: E731
        self.gate_proj, self.up_proj = linear(hidden, intermediate), linear(hidden, intermediate)
        self.down_proj = linear(intermediate, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)]


def get_init_inputs():
    return [HIDDEN, INTERMEDIATE]
