"""Multi-query decode attention (Gemma 2B, Falcon): one new query token per sequence against a
full kv cache that all 8 query heads share (expand, no copy), bf16, fp32 softmax."""
import os

import torch
import torch.nn as nn

# serving sizes; KFORGE_REALWORLD_SHRINK divides them for the CPU (benchmarks/realworld.py)
SHRINK = int(os.environ.get("KFORGE_REALWORLD_SHRINK", "1"))
BATCH, CACHE, HEADS, HEAD_DIM = max(2, 64 // SHRINK), 4096 // SHRINK, 8, 256


class Model(nn.Module):
    def __init__(self, head_dim: int):
        super().__init__()
        self.scale = head_dim ** -0.5

    def forward(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor):
        heads = q.shape[1]
        k = k_cache.expand(-1, heads, -1, -1)
        v = v_cache.expand(-1, heads, -1, -1)
        scores = torch.matmul(q, k.transpose(-1, -2)).float() * self.scale
        return torch.matmul(torch.softmax(scores, dim=-1).to(q.dtype), v)


def get_inputs():
    return [torch.randn(BATCH, HEADS, 1, HEAD_DIM, dtype=torch.bfloat16),
            torch.randn(BATCH, 1, CACHE, HEAD_DIM, dtype=torch.bfloat16),
            torch.randn(BATCH, 1, CACHE, HEAD_DIM, dtype=torch.bfloat16)]


def get_init_inputs():
    return [HEAD_DIM]
