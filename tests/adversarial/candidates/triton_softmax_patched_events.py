"""Exploit (GPU, patched events): an honest kernel that replaces torch.cuda.Event.elapsed_time
(and the harness's own bound copy) so every timed call reads 1 us."""
import sys

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
    y = numerator / tl.sum(numerator, axis=0)
    tl.store(y_ptr + row * row_stride + cols, y, mask=mask)


def launch(x, y):
    n_cols = x.shape[-1]
    softmax_kernel[(x.numel() // n_cols,)](x, y, n_cols, n_cols,
                                           BLOCK_SIZE=triton.next_power_of_2(n_cols))


def fast(self, end):
    return 0.001


torch.cuda.Event.elapsed_time = fast
vars(sys)["modules"]["kforge_nb.evaluator.worker.harness"].event_elapsed = fast


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        launch(x, y)
        return y
