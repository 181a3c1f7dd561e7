"""Session strategies, prompts and one-shot examples, against the local Messages API."""
from __future__ import annotations

import shutil

import pytest

from kforge_nb.agents import AgentConfig
from kforge_nb.evaluator import EvalOptions, evaluate
from kforge_nb.problem import Problem
from kforge_nb.session import Budget, Session
from kforge_nb.targets import get_target
from kforge_nb.ui.terminal import TerminalPolicy
from tests.test_session_anthropic import (EXAMPLES, FASTER, GOOD, PROBLEM, RECOMMENDATION, WRONG,
                                          answer, api, options)  # noqa: F401  (api: fixture)

pytestmark = pytest.mark.slow     # each test runs a session (or judges the Triton example)


@pytest.mark.parametrize("target,expected", [("cpp", "correct"), ("triton", "correct"),
                                             ("cuda", "unavailable"), ("metal", "unavailable")])
def test_each_targets_one_shot_example_passes_kforge_eval(tmp_path, target, expected):
    if target == "cuda" and shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed: the cuda example cannot even be compiled here")
    t = get_target(target)
    result = evaluate(PROBLEM, t.example(), t, EvalOptions(baselines=("eager",),
                                                           out_dir=tmp_path, trials=2))
    assert result.state == expected, result.message
    if target == "cuda":
        assert "compiled with nvcc" in result.message


def session(tmp_path, iterations=2, **kw) -> Session:
    agents = AgentConfig(provider="anthropic", **kw.pop("agents", {}))
    budget = Budget(iterations=iterations, patience=None, **kw.pop("budget", {}))
    return Session(PROBLEM, "cpp", agents, budget, options(tmp_path), out=tmp_path, **kw)


def test_repeated_sampling_evaluates_every_sample_and_keeps_the_best(api, tmp_path):
    api([answer(WRONG), answer(GOOD)])
    s = session(tmp_path, iterations=1, budget={"samples": 2})
    s.run()
    assert sorted(a.result.state for a in s.history) == ["correct", "mismatch"]
    assert s.best.result.state == "correct"


def test_translation_puts_the_verified_kernel_in_the_prompt(api, tmp_path):
    server = api([answer(GOOD)])
    s = session(tmp_path, iterations=1, translate_from=str(EXAMPLES / "triton_softmax.py"))
    s.run()
    assert "softmax_kernel[(rows,)]" in server.user_prompts()[0]
    assert "translate" in server.user_prompts()[0]


def test_aux_files_go_only_into_the_iterations_they_name(api, tmp_path):
    notes = tmp_path / "notes.md"
    notes.write_text("AUX-MARKER: prefer 64-byte rows")
    server = api([answer(WRONG), answer(GOOD)])
    s = session(tmp_path, iterations=2, aux=[f"{notes}@1"])
    s.run()
    first, second = server.user_prompts()
    assert "AUX-MARKER" not in first and "AUX-MARKER" in second


def test_templates_are_overridden_per_iteration_and_appended_to(api, tmp_path):
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "generate.iter1.j2").write_text("ITERATION-ONE {{ problem.name }}: {{ feedback }}")
    (prompts / "generate.append.md").write_text("APPENDED-EVERYWHERE")
    server = api([answer(WRONG), answer(GOOD)])
    s = session(tmp_path, iterations=2, agents={"prompts_dir": str(prompts)})
    s.run()
    first, second = server.user_prompts()
    assert not first.startswith("ITERATION-ONE") and "APPENDED-EVERYWHERE" in first
    assert second.startswith("ITERATION-ONE softmax") and "APPENDED-EVERYWHERE" in second


def test_review_on_the_terminal_redirects_with_the_users_instruction(api, tmp_path):
    server = api([answer(GOOD), RECOMMENDATION, answer(FASTER)])
    answers = iter(["r", "USER-INSTRUCTION: unroll the column loop by 4"])
    s = session(tmp_path, iterations=2, policy=TerminalPolicy(read=lambda _: next(answers)))
    s.run()
    assert s.history[-1].decision.kind == "redirect"
    assert "USER-INSTRUCTION" in server.user_prompts()[2]
    assert "schedule(static, 4)" not in server.user_prompts()[2].split("## Reference")[0]


def test_review_stop_ends_the_session(api, tmp_path):
    api([answer(GOOD), RECOMMENDATION])
    s = session(tmp_path, iterations=3, policy=TerminalPolicy(read=lambda _: "q"))
    s.run()
    assert s.finish_reason == "stopped by the user" and len(s.history) == 1


def test_token_budget_stops_the_loop(api, tmp_path):
    api([{**answer(WRONG), "input_tokens": 900, "output_tokens": 200}, answer(GOOD)])
    s = session(tmp_path, iterations=3, budget={"tokens": 1000})
    s.run()
    assert len(s.history) == 1 and "token budget" in s.finish_reason


def test_separate_analysis_model_is_used_for_the_analysis_role(api, tmp_path):
    server = api([answer(GOOD), RECOMMENDATION, answer(FASTER)])
    s = session(tmp_path, iterations=2, agents={"model": "gen-model",
                                                "analysis_model": "analysis-model"})
    s.run()
    assert [r["body"]["model"] for r in server.requests] == \
        ["gen-model", "analysis-model", "gen-model"]


def test_a_broken_reference_is_reported_not_hung(api, tmp_path):
    api([answer(GOOD)])
    broken = Problem.from_string(PROBLEM.source.replace("return [torch.randn(64, 1000)]",
                                                        "raise ValueError('no data')"))
    s = Session(broken, "cpp", AgentConfig(provider="anthropic"), Budget(iterations=1),
                options(tmp_path), out=tmp_path)
    s.run()
    assert "no data" in (s.error or "")
