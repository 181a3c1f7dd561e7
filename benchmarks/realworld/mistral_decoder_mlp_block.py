"""A Mistral decoder layer's second half: post-attention RMSNorm on (attention output +
residual), the SwiGLU MLP, and the residual add, bf16."""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

# serving sizes; KFORGE_REALWORLD_SHRINK divides them for the CPU (benchmarks/realworld.py)
SHRINK = int(os.environ.get("KFORGE_REALWORLD_SHRINK", "1"))
TOKENS, HIDDEN, INTERMEDIATE = 1024 // SHRINK, 4096 // SHRINK, 14336 // SHRINK


class Model(nn.Module):
    def __init__(self, hidden: int, intermediate: int, eps: float = 1e-5):
        super().__init__()
        linear = lambda i, o: nn.Linear(i, o, bias=False, dtype=torch.bfloat16)  # noqa: E731
        self.norm_weight = nn.Parameter(1 + 0.1 * torch.randn(hidden).to(torch.bfloat16))
        self.gate_proj, self.up_proj = linear(hidden, intermediate), linear(hidden, intermediate)
        self.down_proj = linear(intermediate, hidden)
        self.eps = eps

    def forward(self, attn_out: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        residual = attn_out + residual
        h = residual.float()
        h = self.norm_weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)).to(
            torch.bfloat16)
        return residual + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16),
            torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)]


def get_init_inputs():
    return [HIDDEN, INTERMEDIATE]
