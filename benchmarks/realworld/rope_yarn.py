"""YaRN-scaled rotary embedding (DeepSeek-V3, Qwen2.5 long context): frequencies interpolated
by a linear ramp between the fast and slow wavelengths, cos/sin scaled by the attention factor
0.1 ln(s) + 1; half rotation on the 64-wide rope part of each head, bf16."""
import math
import os

import torch
import torch.nn as nn

# serving sizes; KFORGE_REALWORLD_SHRINK divides them for the CPU (benchmarks/realworld.py)
SHRINK = int(os.environ.get("KFORGE_REALWORLD_SHRINK", "1"))
TOKENS, HEADS, ROPE_DIM = 4096 // SHRINK, max(4, 128 // SHRINK), 64
ORIGINAL_CONTEXT, SCALING = 4096, 8.0


def yarn_inv_freq(dim, theta, scaling, original, beta_fast=32.0, beta_slow=1.0):
    base = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)
    # the dimension whose wavelength fits `rotations` turns in the original context
    at = lambda rotations: dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))  # noqa: E731
    low, high = max(math.floor(at(beta_fast)), 0), min(math.ceil(at(beta_slow)), dim - 1)
    ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / max(high - low, 1e-3)).clamp(0, 1)
    keep = 1 - ramp            # 1: extrapolate (fast dims), 0: interpolate by `scaling`
    return base / scaling * (1 - keep) + base * keep


class Model(nn.Module):
    def __init__(self, rope_dim: int, scaling: float, original: int, theta: float = 10000.0):
        super().__init__()
        inv_freq = yarn_inv_freq(rope_dim, theta, scaling, original)
        angles = torch.outer(torch.arange(int(original * scaling), dtype=torch.float32), inv_freq)
        mscale = 0.1 * math.log(scaling) + 1.0
        self.register_buffer("cos", angles.cos() * mscale)
        self.register_buffer("sin", angles.sin() * mscale)

    def forward(self, positions: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        cos, sin = self.cos[positions].unsqueeze(1), self.sin[positions].unsqueeze(1)
        x1, x2 = x.float().chunk(2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)


def get_inputs():
    return [torch.randint(0, int(ORIGINAL_CONTEXT * SCALING), (TOKENS,)),
            torch.randn(TOKENS, HEADS, ROPE_DIM, dtype=torch.bfloat16)]


def get_init_inputs():
    return [ROPE_DIM, SCALING, ORIGINAL_CONTEXT]
