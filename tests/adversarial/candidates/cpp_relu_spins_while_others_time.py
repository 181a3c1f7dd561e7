"""Exploit (slow the others down): a correct ReLU whose library starts four detached threads
from a C++ static object that spin forever. They burn the cores while eager (and the best so far, timed
beside it as the rival) runs, so their times swell and the candidate's ratios flatter it. The
worker's process tree is read around every block of the other sides: its CPU there is work
done outside its own time. Target: `rejected`, rule `works-outside-its-time`."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <atomic>
#include <cstdint>
#include <pthread.h>

static std::atomic<uint64_t> sink{0};

static void* spin(void*) {
    for (;;) sink.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
}

struct Spinner {
    Spinner() {
        for (int k = 0; k < 4; ++k) {
            pthread_t t;
            pthread_create(&t, nullptr, spin, nullptr);
            pthread_detach(t);
        }
    }
};
static Spinner spinner;

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
