"""Paths and helpers for the adversarial suite: its own candidates and problems, judged by the
real evaluator (no mocks). Candidates are whole files as a model would write them; each one's
docstring says what it tries."""
from __future__ import annotations

import re
from pathlib import Path

from tests.support.evaluator import CANDIDATES, EXAMPLES, PROBLEMS, REPO, line_of  # noqa: F401

HERE = Path(__file__).parent
ADV_CANDIDATES = HERE / "candidates"
ADV_PROBLEMS = HERE / "problems"


def problem_file(name: str) -> Path:
    """An adversarial problem, else a shared test problem, else a shipped example."""
    for folder in (ADV_PROBLEMS, PROBLEMS, EXAMPLES):
        if (folder / f"{name}.py").exists():
            return folder / f"{name}.py"
    raise FileNotFoundError(name)


def candidate_file(name: str) -> Path:
    for folder in (ADV_CANDIDATES, CANDIDATES, EXAMPLES):
        if (folder / f"{name}.py").exists():
            return folder / f"{name}.py"
    raise FileNotFoundError(name)


def source(name: str) -> str:
    return candidate_file(name).read_text()


def problem(name: str):
    from kforge_nb.problem import Problem
    return Problem.from_file(problem_file(name))


def assert_runs_here(row: tuple, options) -> None:
    """A RUNS_HERE row (problem, candidate, target, "kernels launched: ...") judged correct,
    no rule fired, with the launches it names."""
    from kforge_nb.evaluator import evaluate
    from kforge_nb.result import CORRECT
    problem_name, candidate, target, launches = row
    result = evaluate(problem(problem_name), source(candidate), target, options())
    assert result.state == CORRECT, result.message
    assert result.rules == []
    assert f"kernels launched: {launches}" in result.message


def assert_verdict(name: str, case, result) -> None:
    """A row's verdict as its Case says: the state, the rules, each fragment and the pattern of
    the message."""
    assert result.state == case.state, f"{name}: {result.state}: {result.message}"
    assert result.rules == case.rules, result.message
    for said in case.says:
        assert said in result.message, result.message
    assert re.search(case.says_re, result.message), result.message
