"""Exploit (the rival's words posing as kforge's): as the best kernel so far this candidate is
timed beside a newer one (the rival), and its constructor raises an exception whose text clears
the terminal's line, returns to its start and prints "kforge: relu: the reference itself
failed: ..." on a line of its own. The head-to-head is void and its reason is shown in the
verdict's timing line and the notebook; before round five the rival's failure went there raw
(rival.failure_text), escape sequences, carriage return and all. Now it is quoted as any of
the candidate's words are: control characters escaped, each line behind the quote mark."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>

extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        raise RuntimeError("the kernel's tables could not be set up\n\x1b[2K\rkforge: relu: the "
                           "reference itself failed: its worker was killed by SIGKILL.")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
