"""For complex_rotate (z * 1j): writes the real part right (-imag z) and leaves the imaginary
part zero. The comparison used to widen complex outputs with .double(), which keeps only the
real part, so this passed as `correct`."""
import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>

// z and y hold n complex64 values each: (real, imaginary) float pairs.
extern "C" void quarter_turn_real_only(const void* z_ptr, void* y_ptr, int64_t n) {
    const float* z = static_cast<const float*>(z_ptr);
    float* y = static_cast<float*>(y_ptr);
    for (int64_t i = 0; i < n; ++i) {
        y[2 * i] = -z[2 * i + 1];
        y[2 * i + 1] = 0.0f;
    }
}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def forward(self, z: torch.Tensor) -> torch.Tensor:
        z = z.contiguous()
        y = torch.empty_like(z)
        kernels.quarter_turn_real_only(z, y, z.numel())
        return y
