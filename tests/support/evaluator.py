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


def profiled_result(flops: int = 6_400_000) -> Result:
    """A verdict as the evaluator gives one, with a profile and a roofline (values made up)."""
    events = [{"name": f"cpu::kernel_{i % 3}", "start_us": 10.0 * i, "duration_us": 4.0 + i % 5}
              for i in range(40)]
    from kforge_nb.result import Result, Roofline, Timing
    return Result("correct", "ok", "cpp",
                  timing=Timing(real=True, device="CPU (2 cores, 2 threads)", candidate_ms=0.2,
                                eager_ms=0.3, speedup_vs_eager=1.5),
                  roofline=Roofline(flops=flops, min_bytes=512_000, device="CPU (2 cores)",
                                    peak_flops=7.7e10, peak_bandwidth=1.27e11, bound="memory"),
                  profile={"candidate_events": events,
                           "reference_events": [{"name": "aten::softmax", "start_us": 0.0,
                                                 "duration_us": 300.0}]})
