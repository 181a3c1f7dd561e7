"""Paged attention's gather: each sequence's keys and values read from the cache blocks its
block table names, laid out contiguous as [batch, heads, length, dim] for the attention
that follows; bf16."""
import os

import torch
import torch.nn as nn

# serving sizes; KFORGE_REALWORLD_SHRINK divides them for the CPU (benchmarks/realworld.py)
SHRINK = int(os.environ.get("KFORGE_REALWORLD_SHRINK", "1"))
BATCH, BLOCKS_PER_SEQ, BLOCK = max(2, 32 // SHRINK), max(2, 128 // SHRINK), 16
BLOCKS, KV_HEADS, HEAD_DIM = 8192 // SHRINK, max(1, 8 // SHRINK), 128


class Model(nn.Module):
    def forward(self, block_table, key_cache, value_cache):
        batch = block_table.shape[0]
        gather = lambda cache: cache[block_table].reshape(  # noqa: E731
            batch, -1, cache.shape[-2], cache.shape[-1]).transpose(1, 2).contiguous()
        return gather(key_cache), gather(value_cache)


def get_inputs():
    table = torch.randperm(BLOCKS)[:BATCH * BLOCKS_PER_SEQ].reshape(BATCH, BLOCKS_PER_SEQ)
    cache = lambda: torch.randn(BLOCKS, BLOCK, KV_HEADS, HEAD_DIM, dtype=torch.bfloat16)  # noqa: E731
    return [table, cache(), cache()]


def get_init_inputs():
    return []
