"""Exploit (memory cap): a correct C++ ReLU whose library, when loaded, maps HOLD_BYTES of
shared anonymous memory (MAP_SHARED | MAP_ANONYMOUS), writes every page and keeps it. A cap
that counts resident pages minus shared ones (statm's resident - shared) never sees them: 2 GiB
held under a 1 GiB cap was judged `correct`. Counted, it is `runtime_error` (out of memory)."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

HOLD_BYTES = 2 << 30

source = r"""
#include <cstdint>
#include <cstring>
#include <sys/mman.h>

extern "C" int64_t hold_shared(int64_t bytes) {
    void* pages = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (pages == MAP_FAILED) return -1;
    memset(pages, 1, bytes);          // every page resident, and kept: never unmapped
    return bytes;
}

extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""

kernels = cpp.load(source)
held = kernels.hold_shared(HOLD_BYTES)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
