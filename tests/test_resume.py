"""Interrupted runs: killed mid-way, listed by `kforge runs`, continued by `--resume` without
redoing finished iterations; damaged run folders get a clear message.

The kill is placed by the run itself, not by a clock: `kforge run --review` waits on its stdin at
the first recommendation (iteration 0 is judged and saved by then), and the test kills it there
with SIGKILL, as a lost machine or a kernel restart would.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kforge_nb.session import saved
from tests.support.evaluator import REPO

PROBLEM = REPO / "tests" / "problems" / "relu.py"
FAST = ["--target", "cpp", "--provider", "builtin", "--trials", "2", "--no-compile-baseline",
        "--patience", "10"]


def cli(*args, cwd, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "kforge_nb.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300, **kw)


def killed_at_first_recommendation(tmp_path: Path, iterations: int = 3) -> Path:
    """Start a run, SIGKILL it while it waits at iteration 1's decision; its folder."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, "-m", "kforge_nb.cli", "run", str(PROBLEM), *FAST, "--out", "runs",
         "--iterations", str(iterations), "--review"],
        cwd=tmp_path, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    seen = []
    for line in process.stderr:              # blocks until the run itself gets there
        seen.append(line)
        if line.startswith("Recommendation:"):
            break
    else:
        raise AssertionError("the run ended before its first recommendation:\n" + "".join(seen))
    process.send_signal(signal.SIGKILL)
    process.wait(60)
    (folder,) = (tmp_path / "runs").iterdir()
    return folder


def evaluated(folder: Path) -> list[int]:
    lines = (folder / "events.jsonl").read_text().splitlines()
    return [e["iteration"] for e in map(json.loads, lines) if e["kind"] == "evaluated"]


@pytest.mark.slow
def test_a_killed_run_is_listed_and_resumed_without_redoing_finished_work(tmp_path):
    folder = killed_at_first_recommendation(tmp_path)
    state = json.loads((folder / "run.json").read_text())
    assert state["status"] == "running" and state["progress"]["next_iteration"] == 1
    first = state["history"][0]
    judged_at = (folder / "iter-00" / "sample-0" / "result.json").stat().st_mtime_ns

    listing = cli("runs", "runs", cwd=tmp_path)
    assert listing.returncode == 0
    row = next(line for line in listing.stdout.splitlines() if folder.name in line)
    assert "interrupted" in row and "1/3" in row and "correct" in row
    assert "kforge run --resume" in listing.stdout

    resumed = cli("run", "--resume", f"runs/{folder.name}", "--json", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["artifacts"] == f"runs/{folder.name}"      # the same folder goes on
    state = json.loads((folder / "run.json").read_text())
    assert state["status"] == "finished"
    history = state["history"]
    assert history[0] == first                             # kept as it was
    assert all(a["iteration"] >= 1 for a in history[1:])  # and nothing of iteration 0 redone
    assert evaluated(folder).count(0) == 1
    assert (folder / "iter-00" / "sample-0" / "result.json").stat().st_mtime_ns == judged_at
    assert summary["candidates"] == len(history)
    assert summary["iterations"] == len({a["iteration"] for a in history})
    notices = [json.loads(line)["data"].get("text", "")
               for line in (folder / "events.jsonl").read_text().splitlines()]
    assert any("resuming" in n and "kept, not redone" in n for n in notices)

    listing = cli("runs", "runs", "--json", cwd=tmp_path)
    (run,) = json.loads(listing.stdout)
    assert run["status"] == "finished" and run["candidates"] == len(history)


@pytest.mark.slow
def test_a_finished_run_needs_more_iterations_to_go_on(tmp_path):
    done = cli("run", str(PROBLEM), *FAST, "--out", "runs", "--iterations", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (folder,) = (tmp_path / "runs").iterdir()
    again = cli("run", "--resume", str(folder), cwd=tmp_path)
    assert again.returncode == 2
    assert "used all 1 of its iterations" in again.stderr and "--iterations" in again.stderr
    more = cli("run", "--resume", str(folder), "--iterations", "2", "--json", cwd=tmp_path)
    assert more.returncode == 0, more.stderr
    state = json.loads((folder / "run.json").read_text())
    assert state["config"]["budget"]["iterations"] == 2
    assert state["history"][0]["iteration"] == 0 and evaluated(folder).count(0) == 1
    assert state["progress"]["next_iteration"] >= 1


@pytest.mark.slow
def test_a_cut_events_line_is_mended_on_resume(tmp_path):
    folder = killed_at_first_recommendation(tmp_path, iterations=2)
    with open(folder / "events.jsonl", "a") as f:
        f.write('{"kind": "notice", "iteration": 1, "da')           # a write the kill cut
    resumed = cli("run", "--resume", str(folder), "--json", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    lines = (folder / "events.jsonl").read_text().splitlines()
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except ValueError:
            assert line.endswith('"da')                            # only the cut line itself
    assert parsed[-1]["kind"] == "finished"


@pytest.mark.parametrize("damage, message", [
    ("{ not json", "is damaged"),
    ('{"schema": 1}', "lacks status, config, progress, history"),
    ('{"schema": 99, "status": "finished", "config": {}, "progress": {}, "history": []}',
     "has schema 99"),
])
def test_damaged_run_folders_are_named_not_crashed_on(kforge_main, tmp_path, damage, message):
    folder = tmp_path / "runs" / "20261124-000000-relu-cpp"
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(damage)
    listing = kforge_main("runs", "runs")
    assert listing.returncode == 0
    assert "damaged" in listing.stdout and message in listing.stdout
    resumed = kforge_main("run", "--resume", str(folder))
    assert resumed.returncode == 2 and message in resumed.stderr
    assert "Traceback" not in resumed.stderr


def test_folders_that_are_not_runs_are_refused_with_the_reason(kforge_main, tmp_path):
    evaluation = tmp_path / "evaluation"
    evaluation.mkdir()
    (evaluation / "result.json").write_text("{}")
    cases = {str(evaluation): "holds one evaluation (kforge eval), not a run",
             str(tmp_path / "missing"): "is not a folder",
             str(tmp_path): "not a kforge run folder"}
    for path, message in cases.items():
        resumed = kforge_main("run", "--resume", path)
        assert resumed.returncode == 2 and message in resumed.stderr, resumed.stderr
    both = kforge_main("run", str(PROBLEM), "--resume", str(evaluation))
    assert both.returncode == 2 and "not both" in both.stderr
    assert kforge_main("runs", "nowhere").returncode == 2


@pytest.mark.slow
def test_a_run_whose_process_is_alive_is_running_and_not_resumed(tmp_path):
    folder = tmp_path / "runs" / "20261124-000000-relu-cpp"
    folder.mkdir(parents=True)
    state = {"schema": saved.SCHEMA, "status": "running", "pid": os.getpid(),
             "host": __import__("socket").gethostname(), "config": {"budget": {"iterations": 3}},
             "progress": {"next_iteration": 1}, "history": [], "summary": {}}
    (folder / "run.json").write_text(json.dumps(state))
    assert saved.read(folder).status == "running"        # this test's own process is alive
    with pytest.raises(saved.ResumeError, match="still running"):
        saved.resumable(folder)
    state["pid"] = 2 ** 22 + 12345                        # above pid_max: never a live process
    (folder / "run.json").write_text(json.dumps(state))
    assert saved.read(folder).status == "interrupted"


@pytest.mark.slow
def test_a_replayed_run_resumes_where_its_recording_left_off(tmp_path, monkeypatch):
    from kforge_nb.agents import AgentConfig
    from kforge_nb.session import Budget, Session
    from tests.support.fake_anthropic import FakeAnthropic
    from tests.test_session_anthropic import GOOD, PROBLEM, RECOMMENDATION, answer, options
    recording = tmp_path / "live.jsonl"
    # One kernel throughout: the analyst's prompt shows the fastest candidate's code, and which
    # of two near-equal kernels is faster is the machine's to say. The generation prompts still
    # differ (initial, then optimise), so a replay that started over would diverge at once.
    script = [answer(GOOD), RECOMMENDATION, answer(GOOD), RECOMMENDATION, answer(GOOD)]
    with FakeAnthropic(script) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-real-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        live = Session(PROBLEM, "cpp", AgentConfig(provider="anthropic", record=str(recording)),
                       Budget(iterations=3, patience=None), options(tmp_path), out=tmp_path)
        live.run()
    assert [a.result.state for a in live.history] == ["correct"] * 3
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.delenv("ANTHROPIC_BASE_URL")

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, "-m", "kforge_nb.cli", "run", str(PROBLEM.path), "--target", "cpp",
         "--replay", str(recording), "--trials", "2", "--no-compile-baseline", "--patience",
         "10", "--iterations", "3", "--out", "replayed", "--review"],
        cwd=tmp_path, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    for line in process.stderr:
        if line.startswith("Recommendation:"):
            break
    process.send_signal(signal.SIGKILL)
    process.wait(60)
    (folder,) = (tmp_path / "replayed").iterdir()
    resumed = cli("run", "--resume", str(folder), "--json", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr          # no "diverged", no "ran out"
    state = json.loads((folder / "run.json").read_text())
    assert [a["iteration"] for a in state["history"]] == [0, 1, 2]
    assert [a["result"]["state"] for a in state["history"]] == ["correct"] * 3


def sigint_as_at_a_terminal() -> None:
    """A command started in the background inherits SIGINT ignored (and Python then leaves it
    so): the child gets it back, as in a terminal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
def test_ctrl_c_saves_the_run_as_interrupted_and_says_how_to_go_on(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, "-m", "kforge_nb.cli", "run", str(PROBLEM), *FAST, "--out", "runs",
         "--iterations", "3", "--review"],
        cwd=tmp_path, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, preexec_fn=sigint_as_at_a_terminal)
    for line in process.stderr:
        if line.startswith("Recommendation:"):
            break
    process.send_signal(signal.SIGINT)                 # Ctrl-C at the prompt
    rest = process.stderr.read()
    assert process.wait(60) == 2
    (folder,) = (tmp_path / "runs").iterdir()
    assert f"go on with kforge run --resume runs/{folder.name}" in rest
    assert "Traceback" not in rest
    state = json.loads((folder / "run.json").read_text())
    assert state["status"] == "interrupted" and len(state["history"]) == 1
    assert state["summary"]["reason"] == "interrupted (Ctrl-C)"
    assert "interrupted" in cli("runs", "runs", cwd=tmp_path).stdout
