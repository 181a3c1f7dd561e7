"""Llama's rotary embedding (half rotation, rotate_half): q and k of a prefill batch rotated by
the cos/sin cache rows of their positions, computed in fp32 and stored back as bf16."""
import os

import torch
import torch.nn as nn

# serving sizes; KFORGE_REALWORLD_SHRINK divides them for the CPU (benchmarks/realworld.py)
SHRINK = int(os.environ.get("KFORGE_REALWORLD_SHRINK", "1"))
TOKENS, HEAD_DIM, MAX_POSITION = 4096 // SHRINK, 128, 8192
Q_HEADS, KV_HEADS = max(4, 32 // SHRINK), max(1, 8 // SHRINK)


class Model(nn.Module):
    def __init__(self, head_dim: int, max_position: int, theta: float = 500000.0):
        super().__init__()
        inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        angles = torch.outer(torch.arange(max_position, dtype=torch.float32), inv_freq)
        self.register_buffer("cos", angles.cos())
        self.register_buffer("sin", angles.sin())

    def rotate(self, x, cos, sin):
        x1, x2 = x.float().chunk(2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)

    def forward(self, positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor):
        cos, sin = self.cos[positions].unsqueeze(1), self.sin[positions].unsqueeze(1)
        return self.rotate(q, cos, sin), self.rotate(k, cos, sin)


def get_inputs():
    return [torch.randint(0, MAX_POSITION, (TOKENS,)),
            torch.randn(TOKENS, Q_HEADS, HEAD_DIM, dtype=torch.bfloat16),
            torch.randn(TOKENS, KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)]


def get_init_inputs():
    return [HEAD_DIM, MAX_POSITION]
