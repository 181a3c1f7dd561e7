"""Exploit attempt: a C++ softmax that memoises on (address, shape, two sampled values).

The memo (an unbounded dict) serves the stored output whenever the key repeats; the key is
sharp enough that no honest benchmark would ever see a wrong answer. It counts its calls and
hits in $HOME/memo_hits.json (the sandbox folder), so a test can prove no call was served
from the memo: every timed call must get inputs no memo has seen.
"""
import json
import os

import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cmath>
#include <cstdint>

extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* in = x + r * cols;
        float* out = y + r * cols;
        float m = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) m = std::fmax(m, in[c]);
        float s = 0.0f;
        for (int64_t c = 0; c < cols; ++c) { out[c] = std::exp(in[c] - m); s += out[c]; }
        for (int64_t c = 0; c < cols; ++c) out[c] /= s;
    }
}
"""

kernels = cpp.load(source)
stats = {"calls": 0, "hits": 0, "hits_while_profiled": 0}


def record(hit: bool) -> None:
    stats["calls"] += 1
    if hit:
        key = "hits_while_profiled" if torch.autograd._profiler_enabled() else "hits"
        stats[key] += 1
    with open(os.path.join(os.environ["HOME"], "memo_hits.json"), "w") as f:
        json.dump(stats, f)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.memo = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1)
        key = (x.data_ptr(), tuple(x.shape), float(flat[0]), float(flat[-1]))
        hit = key in self.memo
        record(hit)
        if hit:
            return self.memo[key]
        x = x.contiguous()
        y = torch.empty_like(x)
        cols = x.shape[-1]
        kernels.softmax_rows(x, y, x.numel() // cols, cols)
        self.memo[key] = y
        return y
