"""Which rules run: the default bans, what every candidate must define, a user's or a
target's text rule, and `Guardrails`, which puts them together and checks a candidate."""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from ..options import DEFAULT_PRECISION
from .escapes import (extra_threads_or_streams, host_buffer_access, patching_or_introspection,
                      swallowed_exception)
from .native import native_calls_libtorch, native_dynamic_symbols, native_interpreter_access
from .numerics import fast_math, precision_switch, torch_compute_in_forward
from .source import Rule, Source


DEFAULT_BANS = [
    Rule("torch-compute-in-forward", "ModelNew.forward computes with torch ops instead of the "
         "kernel (allow an op deliberately with --allow NAME)", torch_compute_in_forward),
    Rule("precision-switch", "changes precision under the strict policy (use --precision to "
         "opt in to tf32/bf16/fp16)", precision_switch),
    Rule("fast-math", "fast-math flags or pragmas change IEEE results", fast_math),
    Rule("swallowed-exception", "a broad except that hides errors", swallowed_exception),
    Rule("extra-threads-or-streams", "threads, processes or extra streams escape the timer and "
         "the synchronisation", extra_threads_or_streams),
    Rule("patching-or-introspection", "patches library functions or reaches into the "
         "interpreter, which could fake a verdict or a timing", patching_or_introspection),
    Rule("native-calls-libtorch", "C++/CUDA source calls libtorch (at::, torch::, c10::) or a "
         "BLAS/DNN library (cblas, sgemm_, cuBLAS, cuDNN, MKL, oneDNN) to compute instead of "
         "computing itself; allowed there are types, dtype/device constants, allocation "
         "(empty*, zeros*), the current stream, device guards and at::parallel_for",
         native_calls_libtorch),
    Rule("native-dynamic-symbols", "native source loads symbols at run time (dlopen, dlsym, "
         "RTLD_*) or runs code at load time (constructor/destructor/section attributes), "
         "ways to reach library compute or act outside the calls that are judged",
         native_dynamic_symbols),
    Rule("native-interpreter-access", "native source reaches into the interpreter or the "
         "loader (the Python C API, the loader's symbol tables, asm labels naming another "
         "symbol): ways to read the judge's state from inside a timed call or to reach code "
         "the guardrails never see; a kernel needs only the pointers and sizes it is given",
         native_interpreter_access),
    Rule("host-buffer-access", "reads tensor memory from Python through raw buffers (NumPy "
         "ctypeslib/frombuffer, DLPack, ctypes arrays, memoryview), so host code can compute "
         "outside the kernel; hand tensors to the kernel (x.data_ptr() for native code)",
         host_buffer_access),
]


def defines_modelnew(src: Source) -> list[str]:
    return [] if src.candidate_class() else ["no `class ModelNew(nn.Module)` (or NewModel)"]


REQUIRED_FOR_ALL = [Rule("defines-modelnew", "a candidate defines class ModelNew with the "
                         "reference's constructor arguments", defines_modelnew)]


def text_rule(name: str, reason: str, pattern: str, must_match: bool) -> Rule:
    """A user's --ban/--require regex, or a target's required text pattern."""
    regex = re.compile(pattern, re.MULTILINE)

    def check(src: Source) -> list[str]:
        hits = [f"line {src.text.count(chr(10), 0, m.start()) + 1}: {m.group(0)[:60]}"
                for m in regex.finditer(src.text)]
        if must_match:
            return [] if hits else [f"pattern {pattern!r} not found"]
        return hits
    return Rule(name, reason, check)


@dataclass
class Guardrails:
    """Which rules run: defaults, the target's requirements, and the user's own."""
    defaults: bool = True
    bans: list[str] = field(default_factory=list)
    requires: list[str] = field(default_factory=list)
    allow: list[str] = field(default_factory=list)
    precision: str = DEFAULT_PRECISION

    def rules(self, target_rules: list[Rule]) -> list[Rule]:
        # --allow '*': the candidate may compute with torch (a baseline, a memory sweep), so
        # the target's kernel requirements do not apply either
        rules = list(REQUIRED_FOR_ALL) + ([] if "*" in self.allow else list(target_rules))
        if self.defaults:
            rules += DEFAULT_BANS
        rules += [text_rule(f"user-ban:{p}", "banned by the user", p, False) for p in self.bans]
        rules += [text_rule(f"user-require:{p}", "required by the user", p, True)
                  for p in self.requires]
        return rules

    def check(self, text: str, tree: ast.Module, target_rules: list[Rule],
              reference: str = "") -> list[tuple[Rule, list[str]]]:
        src = Source(text, tree, frozenset(self.allow), self.precision, reference)
        fired = []
        for rule in self.rules(target_rules):
            where = rule.check(src)
            if where:
                fired.append((rule, where))
        return fired
