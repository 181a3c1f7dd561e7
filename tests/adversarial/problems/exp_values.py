"""exp(x) elementwise: defined for every float, but past x = 88 float32's answer is inf. The
tails trial's large values overflow in the reference too, so that trial cannot judge a kernel."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.exp(x)


def get_inputs():
    return [torch.randn(8, 64)]


def get_init_inputs():
    return []
