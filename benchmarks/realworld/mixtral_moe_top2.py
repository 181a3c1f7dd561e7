"""Mixtral 8x7B's sparse MoE block as Hugging Face writes it: router softmax in fp32, top-2
experts per token, their weights renormalised to sum to 1, then a loop over the experts that
gathers each expert's tokens, runs its SwiGLU and adds the weighted result back with
index_add_. bf16 (sizes are Mixtral's divided by 2 in width to fit one GPU comfortably)."""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

# serving sizes; KFORGE_REALWORLD_SHRINK divides them for the CPU (benchmarks/realworld.py)
SHRINK = int(os.environ.get("KFORGE_REALWORLD_SHRINK", "1"))
TOKENS, HIDDEN, INTERMEDIATE, EXPERTS, TOP_K = 1024 // SHRINK, 2048 // SHRINK, 7168 // SHRINK, 8, 2


class Model(nn.Module):
    def __init__(self, hidden: int, intermediate: int, experts: int, top_k: int):
        super().__init__()
        self.top_k = top_k
        self.gate = nn.Linear(hidden, experts, bias=False, dtype=torch.bfloat16)
        weight = lambda *shape: nn.Parameter(torch.randn(*shape).to(torch.bfloat16)  # noqa: E731
                                             / shape[-1] ** 0.5)
        self.w1 = weight(experts, intermediate, hidden)     # gate
        self.w3 = weight(experts, intermediate, hidden)     # up
        self.w2 = weight(experts, hidden, intermediate)     # down

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        probs = F.softmax(self.gate(x).float(), dim=-1)
        weights, chosen = torch.topk(probs, self.top_k, dim=-1)
        weights = (weights / weights.sum(dim=-1, keepdim=True)).to(x.dtype)
        out = torch.zeros_like(x)
        for e in range(self.w1.shape[0]):
            token, slot = torch.where(chosen == e)
            h = x[token]
            h = F.silu(h @ self.w1[e].t()) * (h @ self.w3[e].t())
            out.index_add_(0, token, (h @ self.w2[e].t()) * weights[token, slot, None])
        return out


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)]


def get_init_inputs():
    return [HIDDEN, INTERMEDIATE, EXPERTS, TOP_K]
