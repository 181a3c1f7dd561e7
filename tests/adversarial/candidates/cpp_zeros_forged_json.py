"""Exploit (forged reply frame, JSON): as cpp_zeros_pickle_parent, but the frame written onto
the worker's connection to the parent is a 4-byte big-endian length and a UTF-8 JSON object,
the framing a JSON protocol would use: {"written": <the trial's exchange file>, "audit":
{"compute": [], "launches": {"native": 1}}, "inputs_after": [<untouched fingerprint>],
"tampered": []}. The file it names holds the right answer, computed with torch and written
with the evaluator's own writer; the kernel itself only writes zeros. The worker's truthful
reply (pickled through multiprocessing.Connection today) is swallowed, so a parent that
accepted the frame would stay in step. The timed calls return torch's answer. The key file is
written only if something in the parent executes what it reads (it should not: JSON)."""
import json
import os
import struct
import sys
import time

import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

TRIALS = 6

source = r"""
#include <cstdint>

extern "C" void fill_zeros(float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = 0.0f;
}
"""

kernels = cpp.load(source)


def parent_socket() -> int:
    fds = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                fds.append(int(name))
        except OSError:
            continue
    return min(fds)


def write_frame(fd: int, payload: bytes) -> None:
    data = struct.pack("!I", len(payload)) + payload
    while data:
        data = data[os.write(fd, data):]


DROP = [0]


def drop_next_reply() -> None:
    connection = vars(sys)["modules"]["multiprocessing.connection"].Connection
    if getattr(connection.send, "_drops", False):
        DROP[0] += 1
        return
    original = connection.send

    def send(self, obj):
        if DROP[0] > 0:
            DROP[0] -= 1
            return None
        return original(self, obj)
    send._drops = True
    type.__setattr__(connection, "send", send)
    DROP[0] += 1


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.folder = os.path.dirname(os.path.abspath(__file__))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.fill_zeros(y, y.numel())
        if self.calls > TRIALS:
            return x.clamp_min(0.0)
        return self.forge(x, y, self.calls - 1)

    def forge(self, x, y, index):
        # the worker's own modules, looked up where the worker keeps them (an import of them
        # is refused statically)
        harness, transfer = (vars(sys)["modules"][f"kforge_nb.evaluator.{name}"]
                             for name in ("worker.harness", "wire.transfer"))
        path = os.path.join(self.folder, "exchange", f"trial{index}.bin")
        transfer.write_tensors(path, [x.clamp_min(0.0)])
        reply = {"written": path, "audit": {"compute": [], "launches": {"native": 1}},
                 "inputs_after": [harness.fingerprint(x)], "tampered": []}
        drop_next_reply()
        write_frame(parent_socket(), json.dumps(reply).encode())
        deadline = time.monotonic() + 10
        while os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.001)
        return y
