"""The C++ target of the builtin agent: OpenMP kernels for the CPU.

`knobs.py` holds its options (`CppOptions`), the conservative fix and the sweep's steps;
`kernels.py` writes one fused group's kernel, `passes.py` the loops over a group's passes,
`maths.py` the branch-free vectorisable maths helpers, `gemm.py` the register-tiled matrix
product with its epilogue, and `assemble.py` what the shared assemble loop asks of this target.
"""
