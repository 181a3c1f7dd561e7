"""`parse_ast`: ast.parse, safe when several threads parse at once.

CPython 3.11 and 3.12 keep the AST constructor's recursion depth per interpreter, not per
thread (python/cpython#106905): two threads parsing at the same moment can fail with
"SystemError: AST constructor recursion depth mismatch". A session generates and judges a
round's samples on threads, and each of them parses Python (the candidate, the reference), so
every parse in kforge takes this one lock. A parse takes about a millisecond, and the GIL runs
most of it one thread at a time anyway.
"""
from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse_ast(source, filename: str = "<unknown>", mode: str = "exec", **kwargs) -> ast.AST:
    with _LOCK:
        return ast.parse(source, filename, mode, **kwargs)
