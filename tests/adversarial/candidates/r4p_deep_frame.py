"""Exploit (a frame nested 5,000 deep): while it is constructed, the candidate writes onto its
worker's connection to the parent, ahead of the worker's own reply, a frame whose JSON is 5,000
`[`. json's parser recurses once a level: a parent that caught only UnicodeDecodeError and
ValueError let the RecursionError out of evaluate() (`kforge eval` exited 1 with a
traceback). It must be the candidate's runtime_error, a protocol violation."""
import os
import struct
import time

import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>

extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""

kernels = cpp.load(source)


def parent_socket() -> int:
    """The worker's connection to the parent: the one socket among this process's files."""
    fds = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                fds.append(int(name))
        except OSError:
            continue
    return min(fds)


def write_frame(payload: bytes, length: int | None = None) -> None:
    """A frame as the protocol frames one: a 4-byte big-endian length, then the payload."""
    data = struct.pack("!I", len(payload) if length is None else length) + payload
    fd = parent_socket()
    while data:
        data = data[os.write(fd, data):]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        write_frame(b"[" * 5000)
        time.sleep(30)          # the worker's own reply must not come first

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
