"""Gemma 2 9B attention: logits soft-capped by 50 tanh(s / 50) before the causal mask,
queries scaled by query_pre_attn_scalar^-0.5, 16 query heads over 8 kv heads of 256, bf16."""
import os

import torch
import torch.nn as nn

# serving sizes; KFORGE_REALWORLD_SHRINK divides them for the CPU (benchmarks/realworld.py)
SHRINK = int(os.environ.get("KFORGE_REALWORLD_SHRINK", "1"))
BATCH, SEQ, HEAD_DIM, GROUP = max(1, 4 // SHRINK), 2048 // SHRINK, 256, 2
KV_HEADS = max(1, 8 // SHRINK)


class Model(nn.Module):
    def __init__(self, group: int, softcap: float = 50.0, query_pre_attn_scalar: int = 256):
        super().__init__()
        self.group, self.softcap = group, softcap
        self.scale = query_pre_attn_scalar ** -0.5

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        seq = q.shape[-2]
        k = k.repeat_interleave(self.group, dim=1)
        v = v.repeat_interleave(self.group, dim=1)
        scores = (q * self.scale) @ k.transpose(-1, -2)
        scores = torch.tanh(scores.float() / self.softcap) * self.softcap
        causal = torch.ones(seq, seq, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        return torch.softmax(scores, dim=-1).to(q.dtype) @ v


def get_inputs():
    q = torch.randn(BATCH, KV_HEADS * GROUP, SEQ, HEAD_DIM, dtype=torch.bfloat16)
    k = torch.randn(BATCH, KV_HEADS, SEQ, HEAD_DIM, dtype=torch.bfloat16)
    v = torch.randn(BATCH, KV_HEADS, SEQ, HEAD_DIM, dtype=torch.bfloat16)
    return [q, k, v]


def get_init_inputs():
    return [GROUP]
