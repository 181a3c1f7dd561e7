"""Legitimate: the launch sits in `with torch.cuda.stream(torch.cuda.current_stream()):`, the
stream torch is already on, so no extra stream; the launcher also takes that stream as its
`cudaStream_t` parameter."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cuda

source = r"""
#include <cstdint>
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y,
                            std::int64_t n) {
    std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

extern "C" {
void relu(const float* x, float* y, std::int64_t n, cudaStream_t stream) {
    const int threads = 256;
    const int blocks = static_cast<int>((n + threads - 1) / threads);
    relu_kernel<<<blocks, threads, 0, stream>>>(x, y, n);
}
}
"""

kernels = cuda.load(source)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        with torch.cuda.stream(torch.cuda.current_stream()):
            kernels.relu(x, y, x.numel())
        return y
