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


def interpreting() -> bool:
    """Whether Triton runs kernels under its CPU interpreter in this process."""
    import os
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def first_config_bench(kernel_call, quantiles=None, **_):
    """Under the interpreter there is no driver, so no benchmarker: `triton.autotune` would fail
    with "0 active drivers" before the kernel ever ran. Every config "takes" the same time,
    so the autotuner keeps the first one, and no config is run just to be timed (interpreter
    timings mean nothing anyway)."""
    return [0.0, 0.0, 0.0] if quantiles else 0.0


def autotune_under_interpreter() -> None:
    """Let `@triton.autotune` kernels run under the CPU interpreter (the worker's environment):
    the autotuner takes its first (pruned) config instead of benchmarking through a driver.
    Only here: on a GPU the autotuner is untouched."""
    if not interpreting():
        return
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return
    if getattr(Autotuner, "_kforge_interpreter", False):
        return
    Autotuner.do_bench = property(lambda self: first_config_bench)
    Autotuner._kforge_interpreter = True


def cuda_present() -> bool:
    import torch
    return torch.cuda.is_available()


class TritonTarget(Target):
    name = "triton"
    language = "python"
    summary = "Triton kernels (GPU; CPU interpreter for correctness only)"
    required = [Rule("triton-kernel", "a triton candidate defines a @triton.jit kernel and "
                     "launches it", defines_and_launches_jit_kernel)]

    def __init__(self):
        # the worker builds its target before it imports the candidate: the place to make
        # the interpreter able to run autotuned kernels (a no-op off the interpreter)
        autotune_under_interpreter()

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
