"""Your own measurement: `--measure FILE.py` (a `measure(model, inputs) -> dict` hook run on the
reference in the judge and on the candidate in its worker) and `--objective NAME[:min|max]`.

Real parts only: the CLI as a subprocess, real workers, g++-built candidates, the anthropic SDK
against the loopback server of tests/support/fake_anthropic.py. Nothing here depends on which
side is faster: values are checked for presence, type and sign.
"""
from __future__ import annotations

import json

import pytest

from kforge_nb.agents import AgentConfig
from kforge_nb.agents.base import AnalysisRequest
from kforge_nb.agents.builtin.analyst import BuiltinAnalyst
from kforge_nb.agents.builtin.actions import parse_action
from kforge_nb.evaluator import EvalOptions
from kforge_nb.result import CORRECT, Result, Timing
from kforge_nb.session import Session
from kforge_nb.session.records import Attempt
from tests.support.evaluator import CANDIDATES, candidate_source, load_problem, problem_path
from tests.support.fake_anthropic import FakeAnthropic

THROUGHPUT = '''
import time


def measure(model, inputs):
    model(*inputs)                                  # warm
    calls, start = 20, time.perf_counter()
    for _ in range(calls):
        model(*inputs)
    return {"calls_per_s": calls / (time.perf_counter() - start)}
'''

RAISES = '''
def measure(model, inputs):
    rate = 1 / 0
    return {"calls_per_s": rate}
'''

ODD_VALUES = '''
import torch


def measure(model, inputs):
    return {"batch": inputs[0].shape[0], "tensor": torch.ones(1), "flag": True,
            "nan": float("nan")}
'''

FAST = ("--target", "cpp", "--no-compile-baseline", "--trials", "1", "--no-shape-check")


def hook_file(tmp_path, source: str, name: str = "hook.py") -> str:
    path = tmp_path / name
    path.write_text(source)
    return str(path)


@pytest.mark.slow
def test_eval_reports_the_hook_on_both_sides_and_their_ratio(kforge_cli, tmp_path):
    done = kforge_cli("eval", str(problem_path("relu")), str(CANDIDATES / "cpp_relu.py"), *FAST,
                      "--measure", hook_file(tmp_path, THROUGHPUT), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["state"] == CORRECT
    m = data["measures"]
    assert m["hook"].endswith("hook.py") and "error" not in m
    for side in ("reference", "candidate", "ratio"):
        assert isinstance(m[side]["calls_per_s"], float) and m[side]["calls_per_s"] > 0
    assert m["ratio"]["calls_per_s"] == pytest.approx(m["candidate"]["calls_per_s"]
                                                      / m["reference"]["calls_per_s"])
    # the Result read back from --json says them in its summary
    assert "measure (hook.py): calls_per_s candidate" in Result.from_dict(data).summary()


def test_a_hook_that_raises_leaves_the_verdict_correct_and_names_the_exception(judge):
    result = judge("relu", "cpp_relu", trials=1, shape_check=False, measure_hook=RAISES,
                   measure_label="raises.py")
    assert result.state == CORRECT
    m = result.measures
    assert m["reference"] == m["candidate"] == m["ratio"] == {}
    assert "ZeroDivisionError" in m["error"] and "raises.py line 3" in m["error"]
    assert m["error"].count("ZeroDivisionError") == 2        # reference and candidate
    assert "error: reference: measure() raised ZeroDivisionError" in result.summary()


def test_values_that_are_not_numbers_are_errors_for_their_keys(judge):
    result = judge("relu", "cpp_relu", trials=1, shape_check=False, measure_hook=ODD_VALUES,
                   measure_label="odd.py")
    assert result.state == CORRECT
    m = result.measures
    assert m["reference"] == m["candidate"] == {"batch": 8.0}
    assert m["ratio"] == {"batch": 1.0}
    for key in ("'tensor'", "'flag'", "'nan'"):
        assert f"{key} is" in m["error"]
    assert "(use .item())" in m["error"]


@pytest.mark.parametrize("hook, says", [
    (None, "no such file"),
    ("x = 1\n", "defines no `measure`"),
    ("def measure(model, inputs)\n", "line 1"),
])
def test_an_unusable_hook_file_is_a_usage_error(kforge_main, tmp_path, hook, says):
    path = hook_file(tmp_path, hook) if hook is not None else str(tmp_path / "missing.py")
    done = kforge_main("eval", str(problem_path("relu")), str(CANDIDATES / "cpp_relu.py"), *FAST,
                      "--measure", path)
    assert done.returncode == 2
    assert f"kforge: --measure {path}" in done.stderr and says in done.stderr


@pytest.mark.parametrize("flags, says", [
    (["--objective", "calls_per_s"], "give one (def measure(model, inputs)"),
    (["--measure", "HOOK", "--objective", "calls_per_s:fast"], "NAME, NAME:min or NAME:max"),
])
def test_an_objective_without_a_hook_or_a_direction_is_a_usage_error(kforge_main, tmp_path, flags,
                                                                      says):
    flags = [hook_file(tmp_path, THROUGHPUT) if f == "HOOK" else f for f in flags]
    done = kforge_main("run", str(problem_path("relu")), "--provider", "builtin", *flags)
    assert done.returncode == 2 and says in done.stderr


@pytest.mark.slow
def test_the_objective_reaches_the_analysis_prompt(kforge_cli, tmp_path, monkeypatch):
    kernel = {"text": f"Here is the kernel.\n\n```python\n{candidate_source('cpp_relu')}```\n"}
    advice = {"text": "TITLE: unroll\nRECOMMENDATION: unroll the loop by 4.\nEXPECTED GAIN: ~1.1x"}
    with FakeAnthropic([kernel, advice, kernel]) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-real-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        done = kforge_cli("run", str(problem_path("relu")), "--provider", "anthropic", *FAST,
                          "--iterations", "2", "--patience", "0", "--out", str(tmp_path / "runs"),
                          "--measure", hook_file(tmp_path, THROUGHPUT),
                          "--objective", "calls_per_s", "--json")
    assert done.returncode == 0, done.stderr
    assert len(server.requests) == 3
    analysis = server.user_prompts()[1]
    assert "## Objective" in analysis and "maximise calls_per_s: candidate " in analysis
    assert ", reference " in analysis
    # the generation that applies the advice is shown the hook's values too
    assert "measure (hook.py): calls_per_s candidate" in server.user_prompts()[2]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["measures"]["candidate"]["calls_per_s"] > 0


def attempt(n: int, ms: float, **values) -> Attempt:
    result = Result(CORRECT, "ok", timing=Timing(candidate_ms=ms),
                    measures={"candidate": values} if values else {})
    return Attempt(n, 0, "optimise", "code", result)


@pytest.mark.parametrize("objective, best", [
    ("", "2.0"),                       # by speed, as without a hook
    ("calls_per_s", "1.0"),            # max by default
    ("calls_per_s:max", "1.0"),
    ("calls_per_s:min", "0.0"),
    ("latency_ms:min", "2.0"),         # no candidate has it: by speed
])
def test_the_session_ranks_correct_candidates_by_the_objective(tmp_path, objective, best):
    session = Session(load_problem("relu"), "cpp", AgentConfig(provider="builtin"),
                      options=EvalOptions(objective=objective), out=tmp_path)
    session.history.extend([attempt(0, 3.0, calls_per_s=100.0), attempt(1, 2.5, calls_per_s=900.0),
                            attempt(2, 1.0)])   # the fastest, but its hook gave nothing
    assert session.best.id == best


def test_the_saved_reports_text_shows_the_best_candidates_measures(tmp_path):
    from kforge_nb.ui.fallback import to_html, to_text
    from kforge_nb.ui.report import run_record
    session = Session(load_problem("relu"), "cpp", AgentConfig(provider="builtin"),
                      options=EvalOptions(objective="calls_per_s"), out=tmp_path)
    best = attempt(0, 1.0, calls_per_s=100.0)
    best.result.measures.update(hook="/somewhere/hook.py", reference={"calls_per_s": 50.0},
                                ratio={"calls_per_s": 2.0})
    session.history.append(best)
    line = "measure (hook.py): calls_per_s candidate 100, reference 50 (2.00x)"
    record = run_record(session)
    assert line in to_text(record) and line in to_html(record)


def test_the_builtin_analyst_states_the_objective_and_keeps_its_action():
    result = Result(CORRECT, "ok", timing=Timing(real=True, candidate_ms=0.01, eager_ms=0.02,
                                                 speedup_vs_eager=2.0))
    goal = "maximise calls_per_s: candidate 2000, reference 1000 (2.00x)"
    plain = BuiltinAnalyst().analyse(AnalysisRequest(load_problem("relu"), "cpp",
                                                     candidate_source("cpp_relu"), result, {}))
    aimed = BuiltinAnalyst().analyse(AnalysisRequest(load_problem("relu"), "cpp",
                                                     candidate_source("cpp_relu"), result, {},
                                                     objective=goal))
    assert goal in aimed.text and goal not in plain.text
    assert parse_action(aimed.text) == parse_action(plain.text) == plain.action
