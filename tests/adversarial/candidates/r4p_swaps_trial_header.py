"""Exploit (an exchange file whose header is 5,000 `[`, written after the real writer):
nothing in the harness is rebound. __init__ starts a thread (through sys.modules: no import for
a rule to read) that watches the run's exchange folders (the run folder's, and the one in
/dev/shm where outputs cross in memory) and, each time the worker's own writer has put a
trial's output there (trial<i>.bin, moved into place atomically), replaces it at once with a
file whose header line is 5,000 `[`. json's parser recursed past its limit in the judge, whose
RecursionError killed it: the parent said the reference itself failed (`kforge eval` exited 2).
The judge reading a file the candidate wrote and choking on it is the candidate's doing: its
runtime_error, a protocol violation that names the output."""
import os
import sys
import time

import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

HEADER = b"[" * 5000 + b"\n"

source = r"""
#include <cstdint>

extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""

kernels = cpp.load(source)
threads = vars(sys)["modules"]["_thread"]


def spoil_outputs(folder: str) -> None:
    spoiled = set()
    while True:
        names, places = [], [folder]
        try:
            places += [os.path.join("/dev/shm", n) for n in os.listdir("/dev/shm")
                       if n.startswith("kforge-exchange-")]
        except OSError:
            pass
        for place in places:
            try:
                names += [os.path.join(place, n) for n in os.listdir(place)]
            except OSError:
                pass
        for path in names:
            name = os.path.basename(path)
            if not (name.startswith("trial") and name.endswith(".bin")):
                continue
            try:
                stamp = (name, os.stat(path).st_ino)
            except OSError:
                continue
            if stamp in spoiled:
                continue
            with open(path + ".late", "wb") as f:
                f.write(HEADER + bytes(16))
            os.replace(path + ".late", path)
            spoiled.add((name, os.stat(path).st_ino))
        time.sleep(0.0002)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        here = os.path.dirname(os.path.abspath(__file__))
        threads.start_new_thread(spoil_outputs, (os.path.join(here, "exchange"),))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
