"""Mistral 7B's sliding-window attention: causal, and a query sees only the last WINDOW keys;
grouped-query heads (32 over 8), bf16 with an fp32 softmax. The window is a quarter of the
sequence so that it matters at every size."""
import math
import os

import torch
import torch.nn as nn

# serving sizes; KFORGE_REALWORLD_SHRINK divides them for the CPU (benchmarks/realworld.py)
SHRINK = int(os.environ.get("KFORGE_REALWORLD_SHRINK", "1"))
BATCH, SEQ, HEAD_DIM, GROUP = max(1, 2 // SHRINK), 4096 // SHRINK, 128, 4
KV_HEADS, WINDOW = max(1, 8 // SHRINK), 1024 // SHRINK


class Model(nn.Module):
    def __init__(self, group: int, window: int):
        super().__init__()
        self.group, self.window = group, window

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        seq = q.shape[-2]
        k = k.repeat_interleave(self.group, dim=1)
        v = v.repeat_interleave(self.group, dim=1)
        scores = (q @ k.transpose(-1, -2)).float() / math.sqrt(q.shape[-1])
        i = torch.arange(seq, device=q.device)
        distance = i[:, None] - i[None, :]
        hidden = (distance < 0) | (distance >= self.window)
        scores = scores.masked_fill(hidden, float("-inf"))
        return torch.softmax(scores, dim=-1).to(q.dtype) @ v


def get_inputs():
    q = torch.randn(BATCH, KV_HEADS * GROUP, SEQ, HEAD_DIM, dtype=torch.bfloat16)
    k = torch.randn(BATCH, KV_HEADS, SEQ, HEAD_DIM, dtype=torch.bfloat16)
    v = torch.randn(BATCH, KV_HEADS, SEQ, HEAD_DIM, dtype=torch.bfloat16)
    return [q, k, v]


def get_init_inputs():
    return [GROUP, WINDOW]
