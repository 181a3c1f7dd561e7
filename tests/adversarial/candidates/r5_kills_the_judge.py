"""Exploit (the judge killed, the reference blamed): run with --no-sandbox, the candidate's
worker shares the judge's PID namespace and user, so on its first call it finds the judge (the
process the fork server started just before it: its sibling with the latest start) and sends
it SIGKILL, then answers correctly. The parent waiting on the judge saw its worker die and
said "the reference itself failed" (a ProblemError: no verdict, the problem blamed). Now the
judge's death is said as what it is (the judge stopped, killed by SIGKILL, while answering a
step), and since the candidate's processes could signal it, the verdict is the candidate's
runtime_error. In the sandbox (its own PID namespace) no judge is in reach: it raises."""
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


def stat_of(pid: str) -> tuple[int, int]:
    """(parent's pid, start time in clock ticks) of a process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[1]), int(fields[19])


def the_judge() -> int | None:
    """The sibling started last before this worker (the fork server starts the judge first)."""
    me = os.getpid()
    parent, started = stat_of(str(me))
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            ppid, start = stat_of(pid)
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and int(pid) != me and start <= started:
            found.append((start, int(pid)))
    return max(found)[1] if found and parent > 1 else None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.killed = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.killed:
            judge = the_judge()
            if judge is None:
                raise RuntimeError("no judge in reach: this worker has a PID namespace of its own")
            os.kill(judge, 9)      # SIGKILL
            self.killed = True
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
