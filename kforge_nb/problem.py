"""A reference problem in KernelBench form: `class Model`, `get_inputs()`, `get_init_inputs()`.

The reference is only *read* here (parsed, checked for the names it must define). It is executed
in the evaluator's reference worker, never in the caller's process, so a broken `get_inputs`
surfaces there as a `ProblemError` with its traceback excerpt.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from .pyparse import parse_ast


class ProblemError(ValueError):
    """The reference itself is unusable; the message says what is missing and how to fix it."""


REQUIRED_FORM = ("a reference defines `class Model(nn.Module)`, `get_inputs()` returning the "
                 "forward arguments, and optionally `get_init_inputs()` returning the "
                 "constructor arguments (KernelBench form)")


@dataclass(frozen=True)
class Problem:
    source: str
    name: str = "problem"
    path: str | None = None

    @classmethod
    def from_file(cls, path: str | Path) -> "Problem":
        path = Path(path)
        if not path.is_file():
            raise ProblemError(f"reference file {str(path)!r} does not exist")
        try:
            source = decode_source(path.read_bytes(), str(path))
        except ValueError as err:
            raise ProblemError(f"{err}; {REQUIRED_FORM}.") from None
        return cls.from_string(source, name=path.stem, path=str(path))

    @classmethod
    def from_string(cls, source: str, name: str = "problem", path: str | None = None) -> "Problem":
        problem = cls(source=source, name=name, path=path)
        problem.check()
        return problem

    @property
    def label(self) -> str:
        return self.path or f"<{self.name}>"

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    def check(self) -> None:
        """Static checks: it parses, and it defines the names the evaluator calls."""
        line = null_byte_line(self.source)
        if line:
            raise ProblemError(f"{self.label}, line {line}: {NULL_BYTE}; {REQUIRED_FORM}.")
        try:
            tree = parse_ast(self.source, filename=self.label)
        except SyntaxError as err:
            raise ProblemError(
                f"{self.label}, line {err.lineno}: the reference does not parse ({err.msg}). "
                f"Fix the syntax error; {REQUIRED_FORM}.") from None
        defined = top_level_names(tree)
        missing = [n for n in ("Model", "get_inputs") if n not in defined]
        if missing:
            found = ", ".join(sorted(defined)) or "nothing"
            raise ProblemError(
                f"{self.label} defines no {' and no '.join('`%s`' % m for m in missing)} "
                f"(top-level names found: {found}); {REQUIRED_FORM}.")
        if "get_init_inputs" not in defined:
            # KernelBench always defines it; a missing one means "no constructor arguments".
            object.__setattr__(self, "source", self.source.rstrip() +
                               "\n\n\ndef get_init_inputs():\n    return []\n")


def decode_source(data: bytes, label: str) -> str:
    """A Python file's bytes as text: UTF-8, or what its `# -*- coding: ... -*-` line says (a
    BOM is dropped, line endings become \\n). A file that is not text raises ValueError whose
    message names the first bad byte's line and column."""
    try:
        return importlib.util.decode_source(data)
    except UnicodeDecodeError as err:
        raise ValueError(not_text(data, err, label)) from None
    except SyntaxError as err:    # an unknown coding name, or bad bytes in the first two lines
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise ValueError(not_text(data, bad, label)) from None
        raise ValueError(f"{label}, line {err.lineno or 1}: {err.msg}") from None


def not_text(data: bytes, err: UnicodeDecodeError, label: str) -> str:
    line = data.count(b"\n", 0, err.start) + 1
    column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
    return (f"{label}, line {line}, column {column}: byte 0x{data[err.start]:02x} is not "
            f"{err.encoding.upper()} text (a binary file, or saved in another encoding? Python "
            "source is UTF-8 unless a `# -*- coding: NAME -*-` line says otherwise)")


NULL_BYTE = "the file holds a null byte, so it is not Python source (a binary file?)"


def null_byte_line(source: str) -> int:
    """The line of a source's first NUL character (Python will not parse it), or 0."""
    at = source.find("\0")
    return source.count("\n", 0, at) + 1 if at >= 0 else 0


def top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names
