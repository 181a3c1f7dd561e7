"""Legitimate only under `--allow '*'` (baselines, memory sweeps): torch computes the answer
and no kernel of the candidate's own runs."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)
