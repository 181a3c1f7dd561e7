"""Exploit (disk cap): a correct C++ ReLU that, when loaded, writes FILL_BYTES of files into its
kernel cache ($KFORGE_CACHE, the one folder on disk that outlives its judging, kept so that the
same text need not compile again). Uncapped, a candidate fills the disk, and what it wrote
stays for good."""
import os

import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

FILL_BYTES = 5 << 28            # 1.25 GiB, in files of 64 MiB
CHUNK = 64 << 20

source = r"""
#include <cstdint>

extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""

kernels = cpp.load(source)
junk = os.path.join(os.environ["KFORGE_CACHE"], "junk")
os.makedirs(junk, exist_ok=True)
for i in range(FILL_BYTES // CHUNK):
    with open(os.path.join(junk, f"{i}.bin"), "wb") as f:
        f.write(b"\1" * CHUNK)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
