"""Dynamic per-token symmetric int8 quantisation (SmoothQuant / vLLM w8a8): the activation is
divided by a smoothing vector, scale = amax / 127 per token, round-half-even, clamped to
[-128, 127]. Returns the int8 values and the fp32 scales."""
import os

import torch
import torch.nn as nn

# serving sizes; KFORGE_REALWORLD_SHRINK divides them for the CPU (benchmarks/realworld.py)
SHRINK = int(os.environ.get("KFORGE_REALWORLD_SHRINK", "1"))
TOKENS, HIDDEN = 8192 // SHRINK, 4096 // SHRINK


class Model(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.smooth = nn.Parameter(0.5 + torch.rand(hidden))

    def forward(self, x: torch.Tensor):
        h = x.float() / self.smooth
        scale = h.abs().amax(dim=-1, keepdim=True).clamp(min=1e-8) / 127.0
        q = torch.round(h / scale).clamp(-128, 127).to(torch.int8)
        return q, scale


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)]


def get_init_inputs():
    return [HIDDEN]
