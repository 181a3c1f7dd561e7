"""Int8 weight-only linear (torchao / gpt-fast int8 decode): int8 weights with one bf16 scale
per output channel; the activation stays bf16, the weight is cast up, the scale applied to the
product. A decode batch of tokens against a Llama 3 8B up-projection."""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

# serving sizes; KFORGE_REALWORLD_SHRINK divides them for the CPU (benchmarks/realworld.py)
SHRINK = int(os.environ.get("KFORGE_REALWORLD_SHRINK", "1"))
TOKENS, IN_FEATURES, OUT_FEATURES = max(4, 64 // SHRINK), 4096 // SHRINK, 14336 // SHRINK


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        weight = torch.randn(out_features, in_features) / in_features ** 0.5
        scale = weight.abs().amax(dim=1) / 127
        self.register_buffer("weight", torch.round(weight / scale[:, None]).to(torch.int8))
        self.register_buffer("scale", scale.to(torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight.to(x.dtype)) * self.scale


def get_inputs():
    return [torch.randn(TOKENS, IN_FEATURES, dtype=torch.bfloat16)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
