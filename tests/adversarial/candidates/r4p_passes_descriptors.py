"""Exploit (descriptors passed with a frame): while it is constructed, the candidate sends,
ahead of the worker's own reply, a forged failure that claims the state `correct`, and with it
(SCM_RIGHTS) 64 descriptors of a file it made in its folder, `r4p-passed-fd`. A parent that
installed them would hold the candidate's files open for as long as it lives, and 64 more
every frame. The frame is the candidate's runtime_error (a protocol violation); no descriptor
of that file may be open in the parent afterwards."""
import json
import os
import socket
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

FORGED = {"failed": {"state": "correct", "phase": "construct", "type": "Exception", "text": ""}}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        marker = os.open(os.path.join(os.environ["HOME"], "r4p-passed-fd"),
                         os.O_CREAT | os.O_RDWR, 0o600)
        payload = json.dumps(FORGED).encode()
        connection = socket.socket(fileno=os.dup(parent_socket()))
        socket.send_fds(connection, [struct.pack("!I", len(payload)) + payload], [marker] * 64)
        time.sleep(30)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
