"""C++ for the CPU: a plain `extern "C"` shared library (g++ -O3 -march=native -fopenmp).

A candidate holds the C++ in a string, builds it with `kforge_nb.runtime.cpp.load(source)` and
calls its `extern "C"` functions with tensors; see examples/cpp_softmax.py.
"""
from __future__ import annotations

import shutil

from ..guardrails import text_rule
from .base import Availability, Target


class CppTarget(Target):
    name = "cpp"
    language = "python"
    summary = "C++ on the CPU via a C-ABI shared library (OpenMP, auto-vectorised)"
    required = [
        text_rule("cpp-kernel", 'a cpp candidate builds C++ with kforge_nb.runtime.cpp.load() '
                  'and defines an extern "C" function', r'extern\s+"C"', True),
        text_rule("cpp-load", "a cpp candidate builds its source with cpp.load()",
                  r"\bcpp\.load\(|load_inline\(", True),
    ]

    def device(self) -> str:
        return "cpu"

    def availability(self) -> Availability:
        import os
        compiler = os.environ.get("CXX", "g++")
        if shutil.which(compiler) is None:
            return Availability(False, False, f"no C++ compiler ({compiler}) on the PATH; "
                                "install g++ or set CXX")
        return Availability(True, True)
