"""Exploit attempt (a kernel that writes over its inputs only where nobody compares them): the
trials fingerprint a candidate's inputs before and after its call, so ReLU written over the
input is `mismatch` there (tests/candidates/cpp_relu_in_place.py). The timed calls rotate over
a few input sets that the harness refills in place before each call, so within a block the same
tensor objects come back, while every trial (and the first call on each set) gets tensors never
seen before. A tensor seen before is therefore a timed call's: there it writes ReLU over the
input and returns the input itself. Every value the judge reads is right (a kept call's output
is copied as it returns and checked against the reference on that call's inputs), the refill
undoes the write before the set's next call, and the timed kernel allocates no output and
touches half the memory. Elsewhere it is the honest out-of-place kernel.

Red-team round 6: `correct`, the in-place kernel's time reported as the candidate's (on 16 MiB
0.95x eager, interval 0.79-1.10, where the honest kernel judged beside it was 0.55x, 0.51-0.62;
518 of 562 calls in place on the 8x64 ReLU). Target: `mismatch`, input 0 modified in place by
a timed call. It counts its calls and in-place calls
in $HOME/in_place.json (the sandbox folder), written when a trial-like call comes, outside
any timed block.
"""
import json
import os
import weakref

import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>

extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

extern "C" void relu_in_place(float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.seen = {}          # id(tensor) -> a weak reference to it (ids are reused)
        self.counts = {"calls": 0, "in_place": 0}

    def seen_before(self, x: torch.Tensor) -> bool:
        known = self.seen.get(id(x))
        if known is not None and known() is x:
            return True
        self.seen[id(x)] = weakref.ref(x)
        return False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.counts["calls"] += 1
        if x.is_contiguous() and self.seen_before(x):
            self.counts["in_place"] += 1
            kernels.relu_in_place(x, x.numel())
            return x
        self.record()
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y

    def record(self) -> None:
        with open(os.path.join(os.environ.get("HOME", "."), "in_place.json"), "w") as f:
            json.dump(self.counts, f)
