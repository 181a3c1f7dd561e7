"""Llama 3 8B prefill attention as Hugging Face's eager path writes it: grouped-query heads
(32 query heads share 8 key/value heads, repeat_interleave), causal mask added in fp32,
softmax in fp32, bf16 matmuls."""
import math
import os

import torch
import torch.nn as nn

# serving sizes; KFORGE_REALWORLD_SHRINK divides them for the CPU (benchmarks/realworld.py)
SHRINK = int(os.environ.get("KFORGE_REALWORLD_SHRINK", "1"))
BATCH, SEQ, HEAD_DIM, GROUP = max(1, 4 // SHRINK), 2048 // SHRINK, 128, 4
KV_HEADS = max(1, 8 // SHRINK)


class Model(nn.Module):
    def __init__(self, group: int):
        super().__init__()
        self.group = group

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        seq = q.shape[-2]
        k = k.repeat_interleave(self.group, dim=1)
        v = v.repeat_interleave(self.group, dim=1)
        scores = (q @ k.transpose(-1, -2)).float() / math.sqrt(q.shape[-1])
        mask = torch.full((seq, seq), float("-inf"), device=q.device).triu(1)
        probs = torch.softmax(scores + mask, dim=-1).to(q.dtype)
        return probs @ v


def get_inputs():
    q = torch.randn(BATCH, KV_HEADS * GROUP, SEQ, HEAD_DIM, dtype=torch.bfloat16)
    k = torch.randn(BATCH, KV_HEADS, SEQ, HEAD_DIM, dtype=torch.bfloat16)
    v = torch.randn(BATCH, KV_HEADS, SEQ, HEAD_DIM, dtype=torch.bfloat16)
    return [q, k, v]


def get_init_inputs():
    return [GROUP]
