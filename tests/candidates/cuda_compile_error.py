"""`threadIdx.w` does not exist: nvcc rejects CUDA line 5 (candidate line 11)."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cuda

source = r"""
#include <cstdint>

__global__ void relu_kernel(const float* x, float* y, int64_t n) {
    int64_t i = blockIdx.x * blockDim.x + threadIdx.w;
    if (i < n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

extern "C" void relu(const float* x, float* y, int64_t n, cudaStream_t stream) {
    relu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);
}
"""

kernels = cuda.load(source)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        kernels.relu(x, y, x.numel())
        return y
