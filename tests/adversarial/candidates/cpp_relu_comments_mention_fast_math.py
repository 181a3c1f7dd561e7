"""Legitimate: a ReLU whose comments talk about fast-math without using it.

We do not build with -ffast-math (or -Ofast): IEEE results are compared exactly. The strict
precision policy holds: no autocast, no torch.float16, no allow_tf32 = True, no .half().
"""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

# fast-math note: `#pragma GCC optimize("fast-math")` would change results, so it is not here.
source = r"""
#include <cstdint>

// No fast-math: a comparison and a select are exact anyway (-ffast-math would not help).
/* Nor __attribute__((optimize("Ofast"))), nor fast::exp, nor a dlsym'd sgemm_, nor at::relu,
   nor std::async or a std::thread: this comment mentions them and the code uses none. */
extern "C" void relu(const float* x, float* y, int64_t n) {
    const char* note = "fast-math off; no dlsym; not at::relu";   // a string, not code
    (void)note;
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    """Calls the kernel. (A docstring that says torch.autocast or torch.bfloat16 is prose.)"""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # -ffast-math is off; nothing here runs under autocast or in torch.float16
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
