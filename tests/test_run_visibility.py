"""What `kforge run` says while it waits (issue 30, part 4): a model API request that is retried
is a log line and a `retry` event (the attempt, the reason, the wait); a long evaluation says
each step as it ends (`evaluation_step` events, lines on stderr); the final table marks the best
row. The real `anthropic` SDK talks to the scripted server of tests/support/fake_anthropic.py."""
from __future__ import annotations

import io
import json
import logging

import pytest

from kforge_nb.session.events import KINDS
from kforge_nb.ui.report import run_record
from kforge_nb.ui.terminal import Progress
from tests.support.fake_anthropic import FakeAnthropic
from tests.test_session_anthropic import GOOD, PROBLEM, answer, api, run_session  # noqa: F401

FAST = ("--target", "cpp", "--no-compile-baseline", "--trials", "2", "--no-shape-check")


def events_of(folder, kind: str) -> list[dict]:
    lines = (folder / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["kind"] == kind]


def test_a_retried_request_is_an_event_and_a_log_line(api, tmp_path, caplog):
    server = api([{"status": 529}, answer(GOOD)])
    with caplog.at_level(logging.WARNING, logger="kforge_nb.providers"):
        session = run_session(tmp_path, iterations=1)
    assert len(server.requests) == 2 and session.best is not None
    retries = [e for e in session.events if e.kind == "retry"]
    assert len(retries) == 1 and {"retry", "evaluation_step"} <= KINDS
    said = retries[0].data
    assert (said["attempt"], said["reason"], said["wait_s"]) == (1, "HTTP 529", 0.01)
    assert said["service"] == "the Anthropic API" and said["attempts"] == 5
    assert events_of(session.folder, "retry")[0]["data"] == said        # in events.jsonl too
    assert "the Anthropic API: attempt 1 of 5 failed (HTTP 529" in caplog.text
    out = io.StringIO()
    Progress(out)(retries[0])
    assert out.getvalue() == ("retry: the Anthropic API attempt 1 of 5 failed (HTTP 529); "
                              "trying again in 0.0 s\n")
    # the judging's steps, as the evaluator ended them, before its verdict
    steps = [e for e in session.events if e.kind == "evaluation_step"]
    texts = [e.data["text"] for e in steps]
    assert texts[0].startswith("built and constructed (") and steps[0].data["id"] == "0.0"
    assert any(t.startswith("trial 1 of ") and " matches (" in t for t in texts), texts
    assert any(t.startswith("timing (") for t in texts) and any(t.startswith("profile (") for t in texts)
    kinds = [e.kind for e in session.events]
    assert kinds.index("evaluation_step") < kinds.index("evaluated")
    assert any(e["kind"] == "evaluation_step" for e in run_record(session)["events"])


@pytest.mark.slow     # a whole `kforge run`
def test_kforge_run_prints_the_steps_the_retry_and_marks_the_best_row(kforge_cli, tmp_path,
                                                                      monkeypatch):
    with FakeAnthropic([{"status": 500}, answer(GOOD)]) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-real-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        done = kforge_cli("run", str(PROBLEM.path), "--provider", "anthropic", *FAST,
                          "--iterations", "1", "--out", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr
    err = done.stderr
    assert "retry: the Anthropic API attempt 1 of 5 failed (HTTP 500); trying again in" in err
    assert err.count("attempt 1 of 5 failed") == 1        # one line, not a log record besides
    assert "  [0.0] built and constructed (" in err and "  [0.0] trial 1 of " in err
    assert err.index("  [0.0] trial 1 of ") < err.index("[0.0] correct")
    rows = done.stdout.splitlines()
    best = [r for r in rows if r.startswith("0 ")]
    assert len(best) == 1 and "★ best" in best[0]
    assert "★ best: candidate 0.0" in rows



@pytest.mark.slow     # a whole session in worker processes
def test_steps_are_said_from_local_worker_processes_too(api, tmp_path):
    """Under `--workers N` (bench, model) the evaluator runs in a worker process: its steps
    reach the session as they end, as they do in-process."""
    from kforge_nb.agents import AgentConfig
    from kforge_nb.executors.local import LocalWorkers
    from kforge_nb.session import Budget, Session
    from tests.test_session_anthropic import options
    api([answer(GOOD)])
    with LocalWorkers(2, log_dir=tmp_path / "workers") as workers:
        session = Session(PROBLEM, "cpp", AgentConfig(provider="anthropic"),
                          Budget(iterations=1, patience=None), options(tmp_path),
                          out=tmp_path, executor=workers)
        session.run()
    assert session.best is not None and session.best.result.worker.startswith("local-")
    texts = [e.data["text"] for e in session.events if e.kind == "evaluation_step"]
    assert texts[0].startswith("built and constructed (")
    assert any(t.startswith("trial 1 of ") for t in texts) and \
        any(t.startswith("timing (") for t in texts), texts
    kinds = [e.kind for e in session.events]
    assert kinds.index("evaluation_step") < kinds.index("evaluated")
