"""A contiguous kv cache written the way gpt-fast / torchtune do: the new tokens' keys and
values go to their slots with index_copy_ (in place, on a copy of the cache: the inputs are
left as they were), and the updated caches are the outputs. bf16."""
import os

import torch
import torch.nn as nn

# serving sizes; KFORGE_REALWORLD_SHRINK divides them for the CPU (benchmarks/realworld.py)
SHRINK = int(os.environ.get("KFORGE_REALWORLD_SHRINK", "1"))
SLOTS, TOKENS, KV_HEADS, HEAD_DIM = 32768 // SHRINK, 512 // SHRINK, max(1, 8 // SHRINK), 128


class Model(nn.Module):
    def forward(self, k_cache, v_cache, slots, k, v):
        k_cache, v_cache = k_cache.clone(), v_cache.clone()
        k_cache.index_copy_(0, slots, k)
        v_cache.index_copy_(0, slots, v)
        return k_cache, v_cache


def get_inputs():
    cache = lambda: torch.randn(SLOTS, KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)  # noqa: E731
    new = lambda: torch.randn(TOKENS, KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)  # noqa: E731
    return [cache(), cache(), torch.randperm(SLOTS)[:TOKENS], new(), new()]


def get_init_inputs():
    return []
