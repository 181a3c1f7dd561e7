"""Exploit (memory cap): a correct C++ ReLU whose library, when loaded, makes a SysV shared
memory segment of HOLD_BYTES, attaches it, writes every page and detaches it again: memory no
process maps, that a cap on processes never sees, and that outlives the worker in the host's
IPC namespace (until reboot, unless someone removes it). Where shmget is refused it says so
(an OSError with the call's errno) rather than computing on: the verdict shows the refusal."""
import os

import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

HOLD_BYTES = 2 << 30

source = r"""
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <sys/ipc.h>
#include <sys/shm.h>

extern "C" int64_t hold_in_sysv(int64_t bytes) {
    int id = shmget(IPC_PRIVATE, bytes, IPC_CREAT | 0600);
    if (id < 0) return -errno;
    void* pages = shmat(id, nullptr, 0);
    if (pages == (void*)-1) return -errno;
    memset(pages, 1, bytes);
    shmdt(pages);                     // detached: mapped by no process, never removed
    return id;
}

extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""

kernels = cpp.load(source)
held = kernels.hold_in_sysv(HOLD_BYTES)
if held < 0:
    raise OSError(-held, f"shmget: {os.strerror(-held)}")


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
