"""Exploit attempt (a memo no rescale escapes): a C++ matmul that memoises on ratios of each
input's values, a[0]/a[1] and b[0]/b[1], which a global rescale of an input leaves unchanged.
When the key repeats it serves the stored product times (a[0]/a0) * (b[0]/b0), a pass over the
output instead of a product: right for a bilinear op, whatever factor each input was scaled by.
Red-team round 4: `correct` at 1.3-2x where the honest kernel is 0.15-0.52x, when timed calls
were their set's pristine values times one factor.

It counts its calls and hits in $HOME/memo_hits.json (the sandbox folder), so a test can prove
no call was served from the memo.
"""
import json
import os

import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>

extern "C" void matmul(const float* a, const float* b, float* c, int64_t n, int64_t k,
                       int64_t m) {
    for (int64_t i = 0; i < n; ++i) {
        float* row = c + i * m;
        for (int64_t j = 0; j < m; ++j) row[j] = 0.0f;
        for (int64_t p = 0; p < k; ++p) {
            const float aip = a[i * k + p];
            const float* brow = b + p * m;
            for (int64_t j = 0; j < m; ++j) row[j] += aip * brow[j];
        }
    }
}

extern "C" void scaled(const float* stored, float* c, int64_t size, double factor) {
    for (int64_t i = 0; i < size; ++i) c[i] = static_cast<float>(stored[i] * factor);
}
"""

kernels = cpp.load(source)


def ratio(x: torch.Tensor) -> float:
    """None where the second value is zero (a trial may draw zeros): no key, no memo."""
    flat = x.reshape(-1)
    second = float(flat[1])
    return round(float(flat[0]) / second, 5) if second else None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.memo = {}
        self.stats = {"calls": 0, "hits": 0}

    def record(self, hit: bool) -> None:
        """Written every 8 calls, and at once on a first hit (so none goes unrecorded)."""
        self.stats["calls"] += 1
        self.stats["hits"] += hit
        if self.stats["calls"] % 8 == 1 or (hit and self.stats["hits"] == 1):
            with open(os.path.join(os.environ["HOME"], "memo_hits.json"), "w") as f:
                json.dump(self.stats, f)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a.contiguous(), b.contiguous()
        c = torch.empty(a.shape[0], b.shape[1])
        key = (tuple(a.shape), tuple(b.shape), ratio(a), ratio(b))
        first_a, first_b = float(a.reshape(-1)[0]), float(b.reshape(-1)[0])
        keyed = None not in key and first_a != 0.0 and first_b != 0.0
        hit = keyed and key in self.memo
        self.record(hit)
        if hit:
            a0, b0, stored = self.memo[key]
            kernels.scaled(stored, c, c.numel(), (first_a / a0) * (first_b / b0))
            return c
        kernels.matmul(a, b, c, a.shape[0], a.shape[1], b.shape[1])
        if keyed:
            self.memo[key] = (first_a, first_b, c.clone())
        return c
