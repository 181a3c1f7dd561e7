"""vLLM's reshape_and_cache: each new token's key and value go to the paged cache's block
slot_mapping // BLOCK at offset slot_mapping % BLOCK (item assignment, on a copy of the
cache), bf16."""
import os

import torch
import torch.nn as nn

# serving sizes; KFORGE_REALWORLD_SHRINK divides them for the CPU (benchmarks/realworld.py)
SHRINK = int(os.environ.get("KFORGE_REALWORLD_SHRINK", "1"))
BLOCKS, BLOCK, TOKENS = 2048 // SHRINK, 16, 1024 // SHRINK
KV_HEADS, HEAD_DIM = max(1, 8 // SHRINK), 128


class Model(nn.Module):
    def __init__(self, block: int):
        super().__init__()
        self.block = block

    def forward(self, key_cache, value_cache, slot_mapping, key, value):
        key_cache, value_cache = key_cache.clone(), value_cache.clone()
        blocks, offsets = slot_mapping // self.block, slot_mapping % self.block
        key_cache[blocks, offsets] = key
        value_cache[blocks, offsets] = value
        return key_cache, value_cache


def get_inputs():
    cache = lambda: torch.randn(BLOCKS, BLOCK, KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)  # noqa: E731
    new = lambda: torch.randn(TOKENS, KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)  # noqa: E731
    return [cache(), cache(), torch.randperm(BLOCKS * BLOCK)[:TOKENS], new(), new()]


def get_init_inputs():
    return [BLOCK]
