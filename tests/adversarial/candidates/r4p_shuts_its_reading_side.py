"""Exploit (a connection that refuses the parent's next command): during its first trial the
candidate shuts down the reading side of its worker's connection, then returns the right
answer. The parent's next command meets a closed peer (EPIPE); a parent that let
BrokenPipeError out of evaluate() crashed `kforge eval`. It must be the candidate's
runtime_error: its worker, finding its connection closed, exits before reporting."""
import os
import socket

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


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        with socket.socket(fileno=os.dup(parent_socket())) as connection:
            connection.shutdown(socket.SHUT_RD)
        return y
