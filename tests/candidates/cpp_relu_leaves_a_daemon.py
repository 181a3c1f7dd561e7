"""A correct ReLU that starts a process in a session of its own, meant to outlive the
evaluation (the static rules would reject `subprocess`; tests turn them off to see it run)."""
import subprocess

import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

DAEMON = subprocess.Popen(["sleep", "987.654"], start_new_session=True)

kernels = cpp.load(r"""
#include <cstdint>
extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
""")


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
