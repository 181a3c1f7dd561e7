"""Exploit (what other processes open): a correct C++ ReLU that, when loaded, plants in every
folder it can write what hangs or misleads a process that opens a path there without care: a
FIFO as the `.owner` of its memory exchange (another evaluation's sweep of /dev/shm reads the
pid there: an open() that waits for a writer forever hung a real `kforge model` run), FIFOs and
links to SECRET_PATH (a file of the host's, named by the test) in its HOME and in its kernel
cache, a file in HOME larger than what is kept of it, and two small notes. It writes `planted`
in its cache when done; then its first call waits until `go` appears there (at most WAIT_S),
so that another evaluation can run while its plants are in place."""
import glob
import os
import time

import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

SECRET_PATH = "/nonexistent/kforge-secret.txt"
WAIT_S = 120.0
BIG_BYTES = 32 << 20

source = r"""
#include <cstdint>

extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""


def fifo(path: str) -> None:
    if os.path.lexists(path):
        os.unlink(path)
    os.mkfifo(path)


def link(path: str) -> None:
    if not os.path.lexists(path):
        os.symlink(SECRET_PATH, path)


def write(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


kernels = cpp.load(source)
home, cache = os.environ["HOME"], os.environ["KFORGE_CACHE"]
for exchange in glob.glob("/dev/shm/kforge-exchange-*"):
    fifo(os.path.join(exchange, ".owner"))
for folder in (home, cache):
    fifo(os.path.join(folder, "planted_fifo"))
    link(os.path.join(folder, "planted_link"))
write(os.path.join(home, "note.txt"), b"a note\n")
write(os.path.join(home, "notes", "inner.txt"), b"another note\n")
write(os.path.join(home, "big.bin"), b"\1" * BIG_BYTES)
write(os.path.join(cache, "planted"), b"done\n")
waited = False


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        global waited
        deadline = time.monotonic() + WAIT_S
        while not waited and not os.path.exists(os.path.join(cache, "go")) and \
                time.monotonic() < deadline:
            time.sleep(0.05)
        waited = True
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
