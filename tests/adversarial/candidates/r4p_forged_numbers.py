"""Exploit (numbers no honest reply holds): during its first trial the candidate writes, ahead
of the worker's own reply, a trial reply whose launch count is NaN and whose fingerprints of
the inputs are -1 and a 401-digit integer (too large for a float: math.isfinite raises on it).
A parent that took any JSON number for a count would report `native xnan` launches or raise
OverflowError. It must be the candidate's runtime_error, a protocol violation."""
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

FORGED = (b'{"written": "trial0.bin", "audit": {"compute": [], "launches": {"native": NaN}}, '
          b'"inputs_after": [[-1, 1' + b"0" * 400 + b']]}')


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        write_frame(FORGED)
        time.sleep(30)
        return y
