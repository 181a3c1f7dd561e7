"""Exploit (host compute through a raw buffer): the tensor's bytes are read through
`memoryview` and turned into a Python array with `torch.frombuffer`'s counterpart in the
standard library; Python computes the ReLU and a C++ memcpy "kernel" copies it out. No Tensor
method the audit watches is called. Rule: `host-buffer-access`."""
import array

import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>
#include <cstring>

extern "C" void copy(const float* src, float* dst, int64_t n) {
    std::memcpy(dst, src, n * sizeof(float));
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def host_relu(self, x: torch.Tensor) -> torch.Tensor:
        values = array.array("f", memoryview(x.detach()).cast("B"))
        return torch.tensor([v if v > 0.0 else 0.0 for v in values]).reshape(x.shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        answer = self.host_relu(x)
        y = torch.empty_like(x)
        kernels.copy(answer, y, y.numel())
        return y
