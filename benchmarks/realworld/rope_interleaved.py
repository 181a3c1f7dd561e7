"""GPT-J / DeepSeek-V2 style interleaved rotary embedding: pairs (x[2i], x[2i+1]) rotate, the
result is stacked back into the interleaved layout. bf16 in and out, fp32 rotation."""
import os

import torch
import torch.nn as nn

# serving sizes; KFORGE_REALWORLD_SHRINK divides them for the CPU (benchmarks/realworld.py)
SHRINK = int(os.environ.get("KFORGE_REALWORLD_SHRINK", "1"))
TOKENS, HEADS, ROPE_DIM, MAX_POSITION = 4096 // SHRINK, max(4, 32 // SHRINK), 64, 8192


class Model(nn.Module):
    def __init__(self, rope_dim: int, max_position: int, theta: float = 10000.0):
        super().__init__()
        inv_freq = 1.0 / theta ** (torch.arange(0, rope_dim, 2, dtype=torch.float32) / rope_dim)
        angles = torch.outer(torch.arange(max_position, dtype=torch.float32), inv_freq)
        self.register_buffer("cos", angles.cos())
        self.register_buffer("sin", angles.sin())

    def forward(self, positions: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        cos, sin = self.cos[positions].unsqueeze(1), self.sin[positions].unsqueeze(1)
        even, odd = x[..., 0::2].float(), x[..., 1::2].float()
        rotated = torch.stack((even * cos - odd * sin, odd * cos + even * sin), dim=-1)
        return rotated.flatten(-2).to(x.dtype)


def get_inputs():
    return [torch.randint(0, MAX_POSITION, (TOKENS,)),
            torch.randn(TOKENS, HEADS, ROPE_DIM, dtype=torch.bfloat16)]


def get_init_inputs():
    return [ROPE_DIM, MAX_POSITION]
