"""The agent loop against the real `anthropic` SDK talking to a scripted Messages API on 127.0.0.1."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kforge_nb.agents import AgentConfig
from kforge_nb.evaluator import EvalOptions
from kforge_nb.problem import Problem
from kforge_nb.providers import ProviderError
from kforge_nb.providers.anthropic import AnthropicProvider
from kforge_nb.session import Budget, Session
from tests.support.fake_anthropic import FakeAnthropic

pytestmark = pytest.mark.slow     # each test runs a session: candidates judged round after round

EXAMPLES = Path(__file__).parent.parent / "kforge_nb" / "targets" / "examples"
PROBLEM = Problem.from_file(EXAMPLES / "softmax.py")
GOOD = (EXAMPLES / "cpp_softmax.py").read_text()
BROKEN = GOOD.replace("row_sum += row_out[c];", "row_sum += row_out[c]")      # C++ syntax error
WRONG = GOOD.replace("row_out[c] *= inv_sum;", "row_out[c] *= 0.5f * inv_sum;")  # mismatch
FASTER = GOOD.replace("schedule(static)", "schedule(static, 4)")


def answer(code: str) -> dict:
    return {"text": f"Here is the kernel.\n\n```python\n{code}```\n"}


RECOMMENDATION = {"text": "TITLE: chunk the rows\nRECOMMENDATION: give each thread 4 rows at a "
                          "time (schedule(static, 4)) to cut scheduling overhead.\n"
                          "EXPECTED GAIN: ~1.1x"}


@pytest.fixture
def api(monkeypatch):
    def start(script):
        server = FakeAnthropic(script).__enter__()
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-real-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        started.append(server)
        return server
    started: list[FakeAnthropic] = []
    yield start
    for server in started:
        server.__exit__(None, None, None)


def options(tmp_path) -> EvalOptions:
    return EvalOptions(baselines=("eager",), out_dir=tmp_path, trials=2)


def run_session(tmp_path, iterations, **agent_kw) -> Session:
    session = Session(PROBLEM, "cpp", AgentConfig(provider="anthropic", **agent_kw),
                      Budget(iterations=iterations, patience=None), options(tmp_path),
                      out=tmp_path)
    session.run()
    return session


def test_compile_error_is_fed_back_and_fixed_next_round(api, tmp_path):
    server = api([answer(BROKEN), answer(GOOD)])
    session = run_session(tmp_path, iterations=2)
    states = [a.result.state for a in session.history]
    assert states == ["compile_failure", "correct"]
    second_prompt = server.user_prompts()[1]
    assert "expected ';'" in second_prompt          # g++'s own message reached the model
    assert "row_sum += row_out[c]" in second_prompt  # and the failing line


def test_mismatch_is_fed_back_and_fixed_next_round(api, tmp_path):
    server = api([answer(WRONG), answer(GOOD)])
    session = run_session(tmp_path, iterations=2)
    assert [a.result.state for a in session.history] == ["mismatch", "correct"]
    assert "max abs error" in server.user_prompts()[1]


def test_optimisation_round_applies_the_analysts_recommendation(api, tmp_path):
    server = api([answer(GOOD), RECOMMENDATION, answer(FASTER)])
    session = run_session(tmp_path, iterations=2)
    assert [a.result.state for a in session.history] == ["correct", "correct"]
    optimise_request = server.requests[2]["body"]
    assert "Profile summary" in server.user_prompts()[1]
    assert "schedule(static, 4)" in optimise_request["messages"][0]["content"]
    assert session.history[1].recommendation.title == "chunk the rows"
    iteration = Path(session.folder) / "iter-01"
    assert json.loads((iteration / "decision.json").read_text())["kind"] == "accept"
    assert (iteration / "recommendation.json").exists()


@pytest.mark.parametrize("status", [429, 529])
def test_rate_limit_and_overload_are_retried(api, tmp_path, status):
    server = api([{"status": status}, {"status": status}, answer(GOOD)])
    session = run_session(tmp_path, iterations=1)
    assert session.history[0].result.state == "correct"
    assert len(server.requests) == 3


def test_unauthorised_key_names_the_variable(api, tmp_path):
    api([{"status": 401}])
    session = run_session(tmp_path, iterations=1)
    assert session.error and "ANTHROPIC_API_KEY" in session.error
    assert "sk-test" not in json.dumps([e.to_dict() for e in session.events])


def test_plain_and_streaming_requests_give_the_same_reply(api):
    server = api([answer(GOOD), answer(GOOD)])
    streamed = AnthropicProvider(stream=True).complete("sys", [{"role": "user", "content": "x"}], 100)
    plain = AnthropicProvider(stream=False).complete("sys", [{"role": "user", "content": "x"}], 100)
    assert streamed.text == plain.text and "class ModelNew" in plain.text
    assert [r["body"].get("stream", False) for r in server.requests] == [True, False]
    assert streamed.output_tokens == plain.output_tokens > 0


def test_no_code_block_truncated_and_empty_answers_are_generation_failures(api, tmp_path):
    api([{"text": "I think you should use shared memory."},
         {"text": "```python\nclass ModelNew", "stop_reason": "max_tokens"},
         {"text": ""},
         answer(GOOD)])
    session = run_session(tmp_path, iterations=4)
    failures = [a.result.message for a in session.history[:3]]
    assert [a.result.state for a in session.history] == ["generation_failure"] * 3 + ["correct"]
    assert "no code block" in failures[0]
    assert "truncated" in failures[1]
    assert "empty" in failures[2]


def test_tokens_and_cost_are_counted(api, tmp_path):
    api([{**answer(GOOD), "input_tokens": 1000, "output_tokens": 500}])
    session = run_session(tmp_path, iterations=1)
    summary = session.summary()
    assert (summary["input_tokens"], summary["output_tokens"]) == (1000, 500)
    assert summary["cost_usd"] == pytest.approx((1000 * 3 + 500 * 15) / 1e6)


def test_record_then_replay_reproduces_the_verdicts(api, tmp_path):
    api([answer(BROKEN), answer(GOOD), RECOMMENDATION, answer(FASTER)])
    recording = tmp_path / "session.jsonl"
    live = run_session(tmp_path / "live", iterations=3, record=str(recording))
    assert "sk-test" not in recording.read_text()
    replayed = Session(PROBLEM, "cpp", AgentConfig(replay=str(recording)),
                       Budget(iterations=3, patience=None), options(tmp_path / "replay"),
                       out=tmp_path / "replay")
    replayed.run()
    assert [a.result.state for a in replayed.history] == \
        [a.result.state for a in live.history] == ["compile_failure", "correct", "correct"]
    assert [a.code for a in replayed.history] == [a.code for a in live.history]


def test_replay_that_runs_out_says_where(api, tmp_path):
    api([answer(GOOD)])
    recording = tmp_path / "short.jsonl"
    run_session(tmp_path / "live", iterations=1, record=str(recording))
    replayed = Session(PROBLEM, "cpp", AgentConfig(replay=str(recording)),
                       Budget(iterations=2, patience=None), options(tmp_path / "r"),
                       out=tmp_path / "r")
    replayed.run()
    assert "ran out" in replayed.error and "analysis" in replayed.error


def test_missing_key_falls_back_to_builtin_with_a_notice(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    from kforge_nb.providers import resolve
    name, notice = resolve("auto")
    assert name == "builtin" and "ANTHROPIC_API_KEY" in notice
    with pytest.raises(ProviderError, match="ANTHROPIC_API_KEY"):
        AnthropicProvider()


def test_replay_that_diverges_says_where(api, tmp_path):
    api([answer(WRONG), answer(GOOD)])
    recording = tmp_path / "rec.jsonl"
    run_session(tmp_path / "live", iterations=2, record=str(recording))
    other = Problem.from_string(PROBLEM.source.replace("64, 1000", "32, 1000"), name="softmax")
    replayed = Session(other, "cpp", AgentConfig(replay=str(recording)),
                       Budget(iterations=2, patience=None), options(tmp_path / "r"),
                       out=tmp_path / "r")
    replayed.run()
    assert "diverged at generation call 1" in replayed.error
    assert "32" in replayed.error


def test_kforge_run_cli_replays_a_recording_and_prints_a_json_summary(api, tmp_path):
    import subprocess
    import sys
    api([answer(BROKEN), answer(GOOD)])
    recording = tmp_path / "rec.jsonl"
    run_session(tmp_path / "live", iterations=2, record=str(recording))
    proc = subprocess.run(
        [sys.executable, "-m", "kforge_nb.cli", "run", str(EXAMPLES / "softmax.py"), "--target",
         "cpp", "--replay", str(recording), "--iterations", "2", "--trials", "2",
         "--no-compile-baseline", "--out", str(tmp_path / "cli"), "--json"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["best_state"] == "correct" and summary["iterations"] == 2
    assert (Path(summary["artifacts"]) / "best_candidate.py").exists()
    assert "[0.0] compile_failure" in proc.stderr


# --- what the model is told: the machine, the contract, the history ----------------------------

def cpuinfo_model() -> str:
    """The CPU's model name, read here the plain way (the prompt must quote the same)."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.lower().startswith(("model name", "hardware")):
            return line.split(":", 1)[1].strip()
    pytest.skip("no model name in /proc/cpuinfo")


def test_prompts_state_the_machine_the_contract_and_the_history(api, tmp_path):
    import os

    import torch

    from kforge_nb.evaluator.worker.correctness import TOLERANCES
    from kforge_nb.intervals import timing_speedup
    from kforge_nb.knowledge import HERE, read_note
    from kforge_nb.runtime.cpp import FLAGS
    again = {"text": "TITLE: unroll by 4\nRECOMMENDATION: unroll the scale loop by 4.\n"
                     "EXPECTED GAIN: ~1.05x"}
    server = api([answer(BROKEN), answer(GOOD), RECOMMENDATION, answer(WRONG), again,
                  answer(FASTER)])
    session = run_session(tmp_path, iterations=4)
    assert [a.result.state for a in session.history] == \
        ["compile_failure", "correct", "mismatch", "correct"]
    bodies = [r["body"] for r in server.requests]
    fix, analysis, optimise, analysis_again, last = server.user_prompts()[1:]
    generation = [b["system"] for b in bodies if "kernel engineer" in b["system"]]
    assert len(generation) == 4
    # the machine, read from this host, and the contract, read from the code that applies it
    atol, rtol, norm = TOLERANCES["strict"][torch.float32]
    for text in (generation[0], analysis):
        assert f"- CPU: {cpuinfo_model()}" in text
        assert "\n- Clock: " in text and "\n- Compiler: " in text
        assert f"- Cores: {len(os.sched_getaffinity(0))} usable" in text
        assert f"`{' '.join(FLAGS)}`" in text
        assert f"float32: atol {atol:g}, rtol {rtol:g}, relative norm {norm:g}" in text
        assert "a parameter may go straight to a kernel" in text
    # the history: ids, parents, changes, verdicts, speedups, and which was kept
    assert "- 0.0 (written from scratch): compile_failure" in fix
    assert "You start from candidate 0.0, which did not pass (compile_failure" in fix
    good = session.history[1]
    said = f"correct at {good.result.timing.candidate_ms:.4g} ms " \
           f"({timing_speedup(good.result.timing, mark_noise=False)} vs eager)"
    assert f"- 1.0 (a fix of 0.0): {said}; kept as the best; the best now" in analysis
    assert f"You start from candidate 1.0 (the best so far: {said})" in optimise
    assert "- 2.0 (from 1.0 on your advice 'chunk the rows'): mismatch" in analysis_again
    assert "## Why you see 1.0 again\ncandidate 2.0, made from 1.0 on your advice 'chunk the " \
           "rows', was mismatch" in analysis_again
    assert "you are looking at 1.0 again" in analysis_again
    assert "- chunk the rows: 2.0 mismatch" in analysis_again
    assert "Earlier changes to it were not kept: 2.0 on 'chunk the rows' was mismatch" in last
    # each knowledge note whole in every prompt that gets notes (a first and an optimising
    # one): a request stands alone, so one sent earlier was never seen by this one's model
    whole = read_note(HERE / "cpu_openmp_threads.md")
    assert server.user_prompts()[0].count(whole.text) == 1 and optimise.count(whole.text) == 1
    assert whole.text not in fix and "Sent in full" not in optimise
    assert "sk-test" not in json.dumps(bodies)         # no key in any prompt
