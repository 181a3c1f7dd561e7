"""What candidate code imports to build and call native kernels (`cpp.load`, `cuda.load`).

This package runs inside evaluation workers and in exported kernels; it never judges anything.
"""
