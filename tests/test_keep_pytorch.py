"""A kernel slower than PyTorch is never shipped silently: the builtin analyst tries its
recovery strategies first, then says why the module is best left in PyTorch, and the session's
summary, its finished event and every view say so plainly."""
from __future__ import annotations

from pathlib import Path

import pytest

from kforge_nb.agents import AgentConfig
from kforge_nb.agents.base import AnalysisRequest
from kforge_nb.agents.builtin import BuiltinAnalyst
from kforge_nb.agents.builtin.candidate import HEADER_MARK, CodeFacts, stamped
from kforge_nb.problem import Problem
from kforge_nb.result import CORRECT, Result, Roofline, Timing
from kforge_nb.session import Budget, Session
from kforge_nb.ui.fallback import to_text
from kforge_nb.ui.report import run_record
from tests.test_session_anthropic import GOOD, PROBLEM, answer, api, options  # noqa: F401

EXAMPLES = Path(__file__).parent.parent / "kforge_nb" / "targets" / "examples"
# correct, and slower than eager by construction (50 ms asleep per call), on any machine
SLOW = GOOD.replace("import torch\n", "import time\n\nimport torch\n", 1).replace(
    "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n",
    "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        time.sleep(0.05)\n", 1)


def verdict(speedup: float, eager_ms: float = 1.0) -> Result:
    result = Result(CORRECT, "ok", target="cpp")
    result.timing = Timing(real=True, candidate_ms=eager_ms / speedup, eager_ms=eager_ms,
                           speedup_vs_eager=speedup)
    result.roofline = Roofline(min_bytes=8192, speed_of_light_ms=0.1 * eager_ms,
                               fraction_of_sol=0.1 * speedup)
    return result


def walk(speedup: float, eager_ms: float = 1.0) -> list:
    """The analyst's answers, one per round, until it says done."""
    # a candidate whose header says it runs OpenMP loops and parks a value in its output
    code = stamped(f"{HEADER_MARK}\n#pragma omp parallel for\n", "cpp",
                   {"matmul": "kernel", "min_parallel_work": 32768, "reuse_output": True},
                   CodeFacts(openmp=True, parked_output=True))
    answers, history = [], []
    for _ in range(12):
        rec = BuiltinAnalyst().analyse(AnalysisRequest(
            PROBLEM, "cpp", code, verdict(speedup, eager_ms), {}, list(history)))
        answers.append(rec)
        history.append(rec.title)
        if rec.action.get("kind") == "done":
            break
    return answers


def test_slower_than_eager_tries_the_recoveries_then_says_why():
    answers = walk(0.7)
    titles = [a.title for a in answers]
    assert titles[:3] == ["go back to the vendor GEMM", "run the whole call on one thread",
                          "recompute instead of re-reading the output"]
    last = answers[-1]
    assert last.title == "best left in PyTorch"
    assert last.action["verdict"] == "keep_pytorch" and last.action["why"]
    assert sum(a.action.get("kind") == "done" for a in answers) == 1


def test_a_tiny_problem_is_explained_by_call_overhead():
    why = walk(0.5, eager_ms=0.01)[-1].action["why"]
    assert "8 KB of data per call" in why and "call overhead" in why


def test_a_faster_kernel_does_not_get_the_keep_pytorch_verdict():
    answers = walk(1.4)
    assert answers[-1].action.get("kind") == "done"
    assert "verdict" not in answers[-1].action
    recoveries = {"go back to the vendor GEMM", "run the whole call on one thread",
                  "recompute instead of re-reading the output"}
    assert not recoveries & {a.title for a in answers}


@pytest.mark.slow
def test_the_session_says_plainly_that_the_module_is_best_left_in_pytorch(api, tmp_path):
    api([answer(SLOW)] * 6)
    session = Session(PROBLEM, "cpp", AgentConfig(provider="anthropic", analyst=BuiltinAnalyst()),
                      Budget(iterations=6, patience=None), options(tmp_path), out=tmp_path)
    session.run()
    assert session.best.result.state == CORRECT
    assert session.best.result.timing.speedup_vs_eager < 1
    advice = session.summary()["advice"]
    assert advice.startswith("best left in PyTorch: the best candidate runs at 0.")
    assert "(" in advice and advice.endswith(")"), "the reason is part of the advice"
    assert "best left in PyTorch" in session.finish_reason
    finished = [e for e in session.events if e.kind == "finished"][-1]
    assert finished.data["advice"] == advice
    assert "Best left in PyTorch" in to_text(run_record(session))


@pytest.mark.slow
def test_no_advice_when_the_kernel_wins_or_the_timing_is_not_real(api, tmp_path):
    api([answer(GOOD)])
    session = Session(PROBLEM, "cpp", AgentConfig(provider="anthropic", analyst=BuiltinAnalyst()),
                      Budget(iterations=1, patience=None), options(tmp_path), out=tmp_path)
    session.run()
    best = session.best
    best.result.timing.speedup_vs_eager = 1.5
    assert session.advice() is None
    best.result.timing.speedup_vs_eager, best.result.timing.real = 0.5, False
    assert session.advice() is None


@pytest.mark.slow
def test_a_run_cut_short_still_says_why(api, tmp_path):
    """Patience ends the run before the analyst's verdict: the reason comes from the profile."""
    api([answer(SLOW)] * 3)
    session = Session(PROBLEM, "cpp", AgentConfig(provider="anthropic", analyst=BuiltinAnalyst()),
                      Budget(iterations=1, patience=None), options(tmp_path), out=tmp_path)
    session.run()
    advice = session.summary()["advice"]
    assert advice.startswith("best left in PyTorch") and advice.endswith(")")
    assert "speed of light" in advice or "overhead" in advice or "GEMM" in advice
