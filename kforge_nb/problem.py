"""A reference problem in KernelBench form: `class Model`, `get_inputs()`, `get_init_inputs()`.

The reference is only *read* here (parsed, checked for the names it must define). It is executed
in the evaluator's reference worker, never in the caller's process, so a broken `get_inputs`
surfaces there as a `ProblemError` with its traceback excerpt.
"""
from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path


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
        return cls.from_string(path.read_text(), name=path.stem, path=str(path))

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
        try:
            tree = ast.parse(self.source, filename=self.label)
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
