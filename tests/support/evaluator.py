"""Paths and helpers for the evaluator's tests: the problems and candidates they judge."""
from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).parent.parent
PROBLEMS = TESTS / "problems"
CANDIDATES = TESTS / "candidates"
REPO = TESTS.parent
EXAMPLES = REPO / "kforge_nb" / "targets" / "examples"   # the shipped one-shot examples


def problem_path(name: str) -> Path:
    return PROBLEMS / f"{name}.py"


def candidate_source(name: str) -> str:
    """A test candidate, or else a shipped example of that name (e.g. metal_softmax)."""
    path = CANDIDATES / f"{name}.py"
    return (path if path.exists() else EXAMPLES / f"{name}.py").read_text()


def load_problem(name: str):
    from kforge_nb.problem import Problem
    return Problem.from_file(problem_path(name))


def line_of(source: str, fragment: str) -> int:
    """1-based number of the first line of `source` containing `fragment`."""
    return next(i for i, line in enumerate(source.splitlines(), 1) if fragment in line)
