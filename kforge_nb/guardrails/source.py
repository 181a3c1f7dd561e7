"""The candidate as rules read it: its text and syntax tree (`Source`), what a rule is
(`Rule`), and the readers rules share: dotted names and what they are bound to, Triton
kernels, and the strings that are kernel source, matched with their comments and string
literals stripped, as written and after the preprocessor."""
from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from typing import Callable

from ..cpp_source import line_at, preprocessed, strip_cpp_comments_and_strings
from ..options import DEFAULT_PRECISION
from .names import LOCAL, Bindings

CANDIDATE_CLASSES = ("ModelNew", "NewModel")


@dataclass(frozen=True)
class Rule:
    name: str
    reason: str
    check: Callable[["Source"], list[str]]   # returns where it fired; empty = passed


@dataclass
class Source:
    """A candidate's text and syntax tree, with the lookups rules share."""
    text: str
    tree: ast.Module
    allowed_ops: frozenset[str] = frozenset()
    precision: str = DEFAULT_PRECISION
    reference: str = ""        # the problem's source: dtypes it already uses are not switches

    @functools.cached_property
    def bindings(self) -> Bindings:
        """What each name of the candidate's stands for (its imports and aliases followed)."""
        return Bindings(self.tree)

    def names(self, node: ast.AST) -> set[str]:
        """The dotted names an expression stands for, through imports and aliases; a value of
        the candidate's own is `<candidate>.name` (a `def compile` is not the builtin)."""
        return self.bindings.resolve(node) or {dotted(node)} - {""}

    def uses(self):
        """(line, name, as written) for every name chain read in the code, once for each
        name it stands for: `np.from_dlpack` is numpy.from_dlpack, written `np.from_dlpack
        (numpy.from_dlpack)` in a message."""
        for node, _ in self.bindings.uses(self.tree):
            spelled = dotted(node)
            for name in sorted(self.names(node)):
                plain = spelled in ("", name) or name.startswith(LOCAL)
                yield node.lineno, name, spelled or name if plain else f"{spelled} ({name})"

    def strings(self) -> list[str]:
        return [n.value for n in ast.walk(self.tree)
                if isinstance(n, ast.Constant) and isinstance(n.value, str)]

    def code_strings(self) -> list[tuple[int, str]]:
        """(line, value) of the string constants the code uses: not docstrings, not a bare
        string standing as a statement (a comment in all but name). `"a" + "b"` counts as the
        one string it makes; f-strings' constant parts count one by one."""
        if getattr(self, "_code_strings", None) is None:
            prose = {id(n.value) for n in ast.walk(self.tree)
                     if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
            folded, out = set(), []
            for node in ast.walk(self.tree):
                if id(node) in folded or id(node) in prose:
                    continue
                value = _constant_str(node)
                if value is None:
                    continue
                if isinstance(node, ast.BinOp):
                    folded.update(id(n) for n in ast.walk(node))
                out.append((node.lineno, value))
            self._code_strings = out
        return self._code_strings

    def native_sources(self) -> list[tuple[int, str]]:
        """(line, text) of the strings that are kernel source (C/C++/CUDA/Metal): what the
        native rules read, after their comments and string literals are stripped."""
        return [(line, text) for line, text in self.code_strings() if looks_native(text)]

    def candidate_class(self) -> ast.ClassDef | None:
        return next((n for n in self.tree.body
                     if isinstance(n, ast.ClassDef) and n.name in CANDIDATE_CLASSES), None)

    def forward_and_helpers(self) -> list[ast.AST]:
        """ModelNew.forward plus the module-level functions it reaches by name."""
        cls = self.candidate_class()
        if cls is None:
            return []
        functions = {n.name: n for n in self.tree.body if isinstance(n, ast.FunctionDef)
                     and not is_triton_jit(n)}
        todo = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"]
        seen: list[ast.AST] = []
        while todo:
            fn = todo.pop()
            if fn in seen:
                continue
            seen.append(fn)
            for call in (c for c in ast.walk(fn) if isinstance(c, ast.Call)):
                if isinstance(call.func, ast.Name) and call.func.id in functions:
                    todo.append(functions[call.func.id])
        return seen


def _constant_str(node: ast.AST) -> str | None:
    """The value of a string constant, or of a `+` chain of them; None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _constant_str(node.left), _constant_str(node.right)
        if left is not None and right is not None:
            return left + right
    return None


NATIVE_MARKERS = re.compile(r'extern\s+"|__global__|\bkernel\s+void\b|^\s*#\s*[a-z]+|[;{}]',
                            re.MULTILINE)


def looks_native(text: str) -> bool:
    """Whether a string is C/C++/CUDA/Metal source rather than a name, a message or a flag:
    code (comments and literals aside) with a statement, a block, a directive or a kernel."""
    return bool(NATIVE_MARKERS.search(strip_cpp_comments_and_strings(text)))


def native_hits(src: "Source", pattern: str | re.Pattern, strings: bool = True,
                skip_includes: bool = False) -> list[str]:
    """`line N: match` for each match of `pattern` in the code of every kernel source, as
    written and after the preprocessor (`#define NS a##t`, `_Pragma`): its comments blanked
    and (when `strings`) the insides of its string literals too. N is the candidate's line."""
    regex = re.compile(pattern) if isinstance(pattern, str) else pattern
    found: dict[str, None] = {}          # in order, once each
    for first, text in src.native_sources():
        for code in filter(None, (text, preprocessed(text))):
            code = strip_cpp_comments_and_strings(code, strings=strings)
            if skip_includes:
                code = re.sub(r"(?m)^[ \t]*(?:#|%:)[ \t]*include[^\n]*", "", code)
            for m in regex.finditer(code):
                what = " ".join(m.group(0).split())
                found[f"line {first + line_at(code, m.start()) - 1}: {what}"] = None
    return list(found)


def dotted(node: ast.AST) -> str:
    """`torch.nn.functional.relu` for the expression naming it, '' if not a plain name chain."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def is_triton_jit(fn: ast.FunctionDef) -> bool:
    return any(dotted(d.func if isinstance(d, ast.Call) else d).split(".")[-1] in ("jit", "autotune")
               for d in fn.decorator_list)
