"""Exploit (library compute reached at run time): the "kernel" finds MKL's / OpenBLAS's
`sgemm_` (already loaded into the process by torch) with dlsym from a load-time constructor
and hands the whole GEMM to it. No torch op is dispatched and no include names BLAS: the
source spells the symbol in two string literals. Rule: `native-dynamic-symbols`."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>
#include <dlfcn.h>

typedef void (*gemm_fn)(const char*, const char*, const int*, const int*, const int*,
                        const float*, const float*, const int*, const float*, const int*,
                        const float*, float*, const int*);
static gemm_fn gemm = nullptr;

__attribute__((constructor)) static void find_gemm() {
    gemm = (gemm_fn)dlsym(RTLD_DEFAULT, "sgemm" "_");
}

extern "C" void linear(const float* x, const float* w, const float* b, float* y,
                       int64_t rows, int64_t in_f, int64_t out_f) {
    const int m = (int)out_f, n = (int)rows, k = (int)in_f;
    const float one = 1.0f, zero = 0.0f;
    gemm("T", "N", &m, &n, &k, &one, w, &k, x, &k, &zero, y, &m);    // y = x @ w.T
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < out_f; ++c) y[r * out_f + c] += b[c];
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows = x.numel() // x.shape[-1]
        y = torch.empty(*x.shape[:-1], self.linear.out_features, dtype=x.dtype)
        kernels.linear(x, self.linear.weight.contiguous(), self.linear.bias, y, rows,
                       self.linear.in_features, self.linear.out_features)
        return y
