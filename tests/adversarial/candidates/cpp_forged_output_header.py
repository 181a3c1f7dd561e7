"""Exploit (a malformed exchange file): the judge reads each trial's output from a file the
candidate's worker writes (one JSON header line: dtype and shape per tensor, then raw bytes).
__init__ rebinds kforge_nb.evaluator.wire.transfer.write_tensors so that what lands there is
malformed, by MODE:
  "huge_shape": a header claiming a float32 tensor of 2**40 elements, and 16 bytes of data;
  "corrupt_json": a header line that is not JSON;
  "bad_dtype": a dtype string the reader has no entry for.
The judge must say the candidate's output is bad (a protocol violation), never that the
reference itself failed: a candidate must not be able to pin its failure on the problem."""
import os
import sys

import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

MODE = "huge_shape"

source = r"""
#include <cstdint>

extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""

kernels = cpp.load(source)
HEADERS = {"huge_shape": b'[{"dtype": "torch.float32", "shape": [1099511627776]}]\n',
           "corrupt_json": b'[{"dtype": "torch.float32", "shape": [8, 64]\n',
           "bad_dtype":
           b'[{"dtype": "torch.float32\\"; os.system(\\"id\\")", "shape": [8, 64]}]\n'}


def forged_writer(path, tensors):
    with open(path + ".forged", "wb") as f:
        f.write(HEADERS[MODE] + bytes(16))
    os.rename(path + ".forged", path)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        transfer = vars(sys)["modules"]["kforge_nb.evaluator.wire.transfer"]
        vars(transfer)["write_tensors"] = forged_writer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
