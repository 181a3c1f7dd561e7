"""`load(source)`: C++ for the CPU, built with g++ -O3 -march=native -fopenmp, called via a C ABI."""
from __future__ import annotations

import os

from .native import CompileError, NativeModule, build_shared_library

__all__ = ["load", "CompileError", "FLAGS"]

# No -ffast-math: the evaluator's strict precision policy compares against IEEE results.
# -fno-math-errno and -fno-trapping-math change no value: errno (set by sqrt) and floating-
# point exception flags (raised by floor's rounding) are never read, and keeping them exact
# would keep sqrt and floor out of vectorised loops.
FLAGS = ["-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-fno-trapping-math",
         "-shared", "-fPIC", "-std=c++17", "-w"]


def compiler() -> str:
    """The C++ compiler candidates are built with: $CXX, else g++."""
    return os.environ.get("CXX", "g++")


def load(source: str) -> NativeModule:
    return NativeModule(build_shared_library(source, compiler(), FLAGS, ".cpp"), source, "cpu")
