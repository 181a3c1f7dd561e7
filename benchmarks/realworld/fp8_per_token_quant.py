"""Dynamic per-token fp8 (e4m3) quantisation of activations, as DeepSeek-V3 / vLLM fp8 serving
runs before each GEMM, written as quantise-dequantise: scale = amax / 448 per token, x / scale
clamped to ±448 and rounded to e4m3 (torch.float8_e4m3fn; where torch has no float8, rounded to
an integer instead), then multiplied back. Returns the dequantised bf16 values and the fp32
scales."""
import os

import torch
import torch.nn as nn

# serving sizes; KFORGE_REALWORLD_SHRINK divides them for the CPU (benchmarks/realworld.py)
SHRINK = int(os.environ.get("KFORGE_REALWORLD_SHRINK", "1"))
TOKENS, HIDDEN = 8192 // SHRINK, 7168 // SHRINK
FP8_MAX = 448.0
FP8 = getattr(torch, "float8_e4m3fn", None)


class Model(nn.Module):
    def forward(self, x: torch.Tensor):
        amax = x.abs().amax(dim=-1, keepdim=True).float().clamp(min=1e-12)
        scale = amax / FP8_MAX
        q = (x.float() / scale).clamp(-FP8_MAX, FP8_MAX)
        q = q.to(FP8).float() if FP8 is not None else q.round()
        return (q * scale).to(torch.bfloat16), scale


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
