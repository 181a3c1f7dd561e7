"""Convolutions, 1-d to 3-d, plain and transposed, as one kernel per call (Triton and C++).

Every convolution is written as a 3-d one over [N, C, D, H, W] (a 1-d conv has D = H = 1 and
a 1-wide kernel there): stride, padding, dilation, groups, output_padding and the bias are
constants of the kernel, the sizes are its arguments. A transposed convolution is computed in
its gather form: output position o reads input position i = (o + p - k*d) / s wherever that
division is exact and i is in range, so each output is written once, by one program.

Weights as torch stores them: [C_out, C_in/g, kD, kH, kW] for a convolution,
[C_in, C_out/g, kD, kH, kW] for a transposed one.

Every variant KernelBench holds is covered; what stays in torch is decided at capture
(capture/ops_templates.py: padding modes other than zeros, unbatched inputs, 'same' padding
that pads one side more), so the writers here never decline.
"""
from __future__ import annotations

from .conv_cpp import write as cpp
from .conv_triton import write as triton

__all__ = ["cpp", "triton"]
