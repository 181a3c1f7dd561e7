"""Exploit (the measure hook told apart by its seed): the user's measure(model, inputs) hook
(--measure) ran on inputs drawn from seed options.seed + 2000, the same in every judging, so a
candidate knew when it was being measured (torch.initial_seed() == 2000) and what the hook's
inputs would be. This one answers zeros then (any forged figure would do: a hook that sums the
output, or times calls served from answers computed ahead). Everywhere else it is an honest
ReLU, so its verdict is `correct` either way; the hook's figures are what it forges. The hook's
seed is drawn from the judging's secret now, as the trials' and the timed calls' are."""
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
OLD_HOOK_SEED = 2000


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.zeros_like(x)
        measured = torch.initial_seed() == OLD_HOOK_SEED
        kernels.relu(x, y, 0 if measured else x.numel())
        return y
