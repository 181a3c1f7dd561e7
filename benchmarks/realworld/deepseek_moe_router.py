"""DeepSeek-V3's router: sigmoid affinities in fp32, a per-expert bias that only steers the
choice, group-limited selection (the best 4 of 8 expert groups by the sum of each group's top
2), top 8 experts, their unbiased affinities normalised and scaled by 2.5. Returns the weights
(fp32) and the expert ids."""
import os

import torch
import torch.nn as nn

# serving sizes; KFORGE_REALWORLD_SHRINK divides them for the CPU (benchmarks/realworld.py)
SHRINK = int(os.environ.get("KFORGE_REALWORLD_SHRINK", "1"))
TOKENS, HIDDEN, EXPERTS = 4096 // SHRINK, 7168 // SHRINK, 256


class Model(nn.Module):
    def __init__(self, hidden: int, experts: int, groups: int = 8, top_groups: int = 4,
                 top_k: int = 8, scaling: float = 2.5):
        super().__init__()
        self.weight = nn.Parameter((torch.randn(experts, hidden) / hidden ** 0.5).to(torch.bfloat16))
        self.bias = nn.Parameter(0.01 * torch.randn(experts))
        self.groups, self.top_groups, self.top_k, self.scaling = groups, top_groups, top_k, scaling

    def forward(self, x: torch.Tensor):
        scores = torch.sigmoid((x @ self.weight.t()).float())
        biased = scores + self.bias
        tokens = x.shape[0]
        by_group = biased.view(tokens, self.groups, -1)
        group_score = by_group.topk(2, dim=-1).values.sum(dim=-1)
        kept = torch.zeros_like(group_score).scatter_(
            1, group_score.topk(self.top_groups, dim=-1).indices, 1.0)
        allowed = kept.unsqueeze(-1).expand_as(by_group).reshape(tokens, -1)
        ids = biased.masked_fill(allowed == 0, float("-inf")).topk(self.top_k, dim=-1).indices
        weights = scores.gather(1, ids)
        weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20) * self.scaling
        return weights, ids


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)]


def get_init_inputs():
    return [HIDDEN, EXPERTS]
