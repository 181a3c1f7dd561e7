"""A true 1-D convolution (taps reversed) of each row with five fixed taps, its edges
reflected: the problem a wrapper answers by moving data (pad, unfold, flip) for a kernel."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("taps", torch.tensor([1.0, 2.0, 3.0, -1.0, 0.5]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        padded = F.pad(x.unsqueeze(1), (2, 2), mode="reflect")
        return F.conv1d(padded, self.taps.flip(0).view(1, 1, 5)).squeeze(1)


def get_inputs():
    return [torch.randn(32, 256)]


def get_init_inputs():
    return []
