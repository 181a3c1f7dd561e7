"""Qwen2's fused qkv projection with bias (Qwen keeps a bias on q, k and v): one bf16 GEMM,
then split into 28 query heads and 4 kv heads of 128 and laid out [heads, tokens, dim]."""
import os

import torch
import torch.nn as nn

# serving sizes; KFORGE_REALWORLD_SHRINK divides them for the CPU (benchmarks/realworld.py)
SHRINK = int(os.environ.get("KFORGE_REALWORLD_SHRINK", "1"))
TOKENS, HEAD_DIM, Q_HEADS, KV_HEADS = 2048 // SHRINK, 128 // min(SHRINK, 4), 28, 4
HIDDEN = 3584 // SHRINK


class Model(nn.Module):
    def __init__(self, hidden: int, q_heads: int, kv_heads: int, head_dim: int):
        super().__init__()
        self.sizes = (q_heads * head_dim, kv_heads * head_dim, kv_heads * head_dim)
        self.head_dim = head_dim
        self.qkv = nn.Linear(hidden, sum(self.sizes), bias=True, dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor):
        q, k, v = self.qkv(x).split(self.sizes, dim=-1)
        heads = lambda t: t.view(x.shape[0], -1, self.head_dim).transpose(0, 1)  # noqa: E731
        return heads(q), heads(k), heads(v)


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)]


def get_init_inputs():
    return [HIDDEN, Q_HEADS, KV_HEADS, HEAD_DIM]
