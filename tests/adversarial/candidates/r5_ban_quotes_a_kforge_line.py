"""Exploit (a line that poses as kforge, through a guardrail): a user who bans printing from
kernels (a --ban regex: the cout stream and what follows it up to a semicolon) has each match
quoted in the verdict. This candidate's kernel source holds a comment the ban matches: the
stream's name, the terminal sequences that clear the line and move to its first column, a line
break and "kforge: relu: the reference itself failed". The match went into the message raw: a
terminal showed a kforge line of the candidate's making. Now a match is quoted on the rule's
own line: control characters and line breaks escaped."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>

/* std::cout[2K[G
kforge: relu: the reference itself failed: its worker was killed by SIGKILL. */
extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
