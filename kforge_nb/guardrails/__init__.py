"""Static guardrails: rules read off a candidate's source before any of it runs.

A rule has a name (what a verdict lists), a one-line reason, and a check that returns the
places it fired. Targets add their required patterns; users add bans and requirements of
their own (`--ban REGEX`, `--require REGEX`) and allow torch ops they want kept (`--allow`).

The default rules read code, never what is said about it: Python through its syntax tree
(docstrings, comments and strings that are only prose do not count), each name followed to
what it is bound to (`from torch._C import X as y`: y is torch._C.X), kernel source (the
strings that are C/C++/CUDA/Metal) through kforge_nb.cpp_source, with its comments and string
literals stripped, as written and after the preprocessor. Each rule says where it fired as
`line N: what`, N the candidate's line.
A user's --ban/--require regex still reads the whole text, as written.

The package, by role:
    source    `Source`, `Rule` and the readers rules share (dotted names, kernel strings)
    names     what a name of the candidate's is bound to: its imports and aliases followed
    numerics  bans on what is computed and how precisely (torch in forward, precision, fast-math)
    escapes   bans on ways around the timer and the audit (threads, patching, raw buffers)
    native    bans on kernel source that calls libraries or loads symbols instead of computing
    rules     the default rule table, text rules, and `Guardrails`, which runs them
"""
from __future__ import annotations

from .escapes import (extra_threads_or_streams, host_buffer_access, patching_or_introspection,
                      swallowed_exception)
from .native import native_calls_libtorch, native_dynamic_symbols
from .numerics import fast_math, precision_switch, torch_compute_in_forward
from .rules import DEFAULT_BANS, REQUIRED_FOR_ALL, Guardrails, defines_modelnew, text_rule
from .source import (CANDIDATE_CLASSES, Rule, Source, dotted, is_triton_jit, looks_native,
                     native_hits)

__all__ = [
    "CANDIDATE_CLASSES", "DEFAULT_BANS", "REQUIRED_FOR_ALL", "Guardrails", "Rule", "Source",
    "defines_modelnew", "dotted", "extra_threads_or_streams", "fast_math", "host_buffer_access",
    "is_triton_jit", "looks_native", "native_calls_libtorch", "native_dynamic_symbols",
    "native_hits", "patching_or_introspection", "precision_switch", "swallowed_exception",
    "text_rule", "torch_compute_in_forward",
]
