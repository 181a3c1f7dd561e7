"""A small multi-part model for whole-model tests: pre-norm MLP blocks with a residual, an
RMSNorm written by hand (traced through by torch.fx), LayerNorms, GEMMs and activations."""
import torch
import torch.nn as nn


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Block(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, hidden)
        self.act = nn.GELU()
        self.down = nn.Linear(hidden, d)

    def forward(self, x):
        return x + self.down(self.act(self.up(self.norm(x))))


class Model(nn.Module):
    def __init__(self, d=128, hidden=256, depth=2):
        super().__init__()
        self.embed_norm = RMSNorm(d)
        self.blocks = nn.ModuleList([Block(d, hidden) for _ in range(depth)])
        self.head = nn.Linear(d, d)
        self.out_norm = nn.LayerNorm(d)

    def forward(self, x):
        x = self.embed_norm(x)
        for block in self.blocks:
            x = block(x)
        return self.out_norm(torch.nn.functional.silu(self.head(x)))


def get_inputs():
    return [torch.randn(64, 128)]


def get_init_inputs():
    return [128, 256, 2]
