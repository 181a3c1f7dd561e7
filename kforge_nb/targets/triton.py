"""Triton: on a CUDA GPU when there is one, otherwise under Triton's CPU interpreter.

Under the interpreter (TRITON_INTERPRET=1) kernels run as NumPy on the CPU: results are real,
timings are not, and every timing is marked so.
"""
from __future__ import annotations

import ast

from ..guardrails import Rule, Source, dotted, is_triton_jit
from .base import Availability, Target

INTERPRETER_NOTE = "interpreter — not a performance figure"


def defines_and_launches_jit_kernel(src: Source) -> list[str]:
    kernels = {n.name for n in ast.walk(src.tree)
               if isinstance(n, ast.FunctionDef) and is_triton_jit(n)}
    if not kernels:
        return ["no @triton.jit kernel"]
    launched = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript) and
                   dotted(n.func.value) in kernels for n in ast.walk(src.tree))
    return [] if launched else [f"@triton.jit kernel(s) {sorted(kernels)} never launched "
                                "as kernel[grid](...)"]


def cuda_present() -> bool:
    import torch
    return torch.cuda.is_available()


class TritonTarget(Target):
    name = "triton"
    language = "python"
    summary = "Triton kernels (GPU; CPU interpreter for correctness only)"
    required = [Rule("triton-kernel", "a triton candidate defines a @triton.jit kernel and "
                     "launches it", defines_and_launches_jit_kernel)]

    def device(self) -> str:
        return "cuda" if cuda_present() else "cpu"

    def availability(self) -> Availability:
        try:
            import triton  # noqa: F401
        except ImportError:
            return Availability(False, False, "triton is not installed: pip install triton")
        return Availability(True, True)

    def worker_env(self) -> dict[str, str]:
        return {} if cuda_present() else {"TRITON_INTERPRET": "1"}

    def timing_note(self) -> str:
        return "" if cuda_present() else INTERPRETER_NOTE

    def is_compile_error(self, exc: BaseException) -> bool:
        """Triton's compiler errors; under the interpreter, errors raised by tl's semantics."""
        try:
            from triton.compiler.errors import CompilationError
        except ImportError:
            CompilationError = ()
        if isinstance(exc, CompilationError) or super().is_compile_error(exc):
            return True
        cause = exc.__cause__
        if type(exc).__name__ == "InterpreterError" and cause is not None:
            tb = cause.__traceback__
            while tb is not None:
                filename = tb.tb_frame.f_code.co_filename.replace("\\", "/")
                if "/triton/language/" in filename:
                    return True
                tb = tb.tb_next
        return False
