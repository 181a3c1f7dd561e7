"""Exploit (memory cap): a correct C++ ReLU whose library, when loaded, writes HOLD_BYTES into a
memfd (memfd_create, then write(2), never mapped) and keeps the descriptor: memory no process
maps and no file system of the sandbox holds, so no count of resident pages or of its tmpfs
sees it. Where memfd_create is refused it says so (an OSError with the call's errno) rather
than computing on: the verdict shows the refusal."""
import os

import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

HOLD_BYTES = 2 << 30

source = r"""
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

static char chunk[1 << 20];

extern "C" int64_t hold_in_memfd(int64_t bytes) {
    int fd = memfd_create("kforge-unseen", 0);
    if (fd < 0) return -errno;
    memset(chunk, 1, sizeof chunk);
    for (int64_t done = 0; done < bytes; done += sizeof chunk)
        if (write(fd, chunk, sizeof chunk) < 0) return -errno;
    return fd;                        // kept open: the pages stay, mapped by no one
}

extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""

kernels = cpp.load(source)
held = kernels.hold_in_memfd(HOLD_BYTES)
if held < 0:
    raise OSError(-held, f"memfd_create: {os.strerror(-held)}")


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
