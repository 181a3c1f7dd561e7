"""Legitimate: the Triton launch lives in a helper object stored as `self.softmax`; forward is
`return self.softmax(x)`. The attribute shares a torch op's name, and that is all it shares."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    numerator = tl.exp(x)
    tl.store(y_ptr + row * row_stride + cols, numerator / tl.sum(numerator, axis=0), mask=mask)


class TritonSoftmax:
    """Launches one program per row; the block covers the whole row."""

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_cols = x.shape[-1]
        y = torch.empty_like(x)
        softmax_kernel[(x.numel() // n_cols,)](x, y, n_cols, n_cols,
                                               BLOCK_SIZE=triton.next_power_of_2(n_cols))
        return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.softmax = TritonSoftmax()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.softmax(x)
