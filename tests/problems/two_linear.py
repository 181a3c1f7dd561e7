"""Many parameters: two linear layers with a ReLU between (fc1.weight, fc1.bias, fc2.weight,
fc2.bias). A candidate with the same parameter names gets the reference's weights copied in."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, hidden: int, out_features: int):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return [32, 64, 16]
