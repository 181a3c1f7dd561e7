"""Row softmax in Triton: one program per row, the whole row in one block."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    # Each program owns one row; columns past n_cols are masked and read as -inf so they
    # vanish from the max and contribute exp(-inf) = 0 to the sum.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    numerator = tl.exp(x)
    y = numerator / tl.sum(numerator, axis=0)
    tl.store(y_ptr + row * row_stride + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_cols = x.shape[-1]
        rows = x.numel() // n_cols
        y = torch.empty_like(x)
        softmax_kernel[(rows,)](x, y, n_cols, n_cols, BLOCK_SIZE=triton.next_power_of_2(n_cols))
        return y
