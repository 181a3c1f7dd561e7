"""API faults survived: the real `anthropic` SDK against a scripted server on 127.0.0.1.

Timeouts, 429, 5xx, 529, connection resets and streams cut half-way are retried with backoff
(one policy, ours: the SDK's retries are off), until an answer, the attempts are used up, or the
run's time budget would end first; 400/401/403/404 fail at once. No wait here is real: the
provider's `sleep` is replaced by one that records the delays, and where a deadline matters its
`clock` is a fake one that only the recorded sleeps move.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kforge_nb.agents import AgentConfig, make_agents
from kforge_nb.providers import ProviderError
from kforge_nb.providers.anthropic import AnthropicProvider
from kforge_nb.providers.recording import ReplayProvider, request_digest
from kforge_nb.providers.retry import MAX_DELAY, backoff, retry_after_seconds
from tests.test_session_anthropic import GOOD, answer, api, run_session  # noqa: F401 (fixture)

KEY = "sk-test-not-a-real-key"       # what the `api` fixture puts in ANTHROPIC_API_KEY
PROMPT = [{"role": "user", "content": "write the kernel"}]


class FakeTime:
    """A clock that only moves when the provider sleeps; the sleeps are recorded."""

    def __init__(self):
        self.now, self.waits = 1000.0, []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


def provider(first_timeout: float = 30.0, **kw) -> tuple[AnthropicProvider, FakeTime]:
    p = AnthropicProvider(timeout_s=first_timeout, base_delay=1.0, **kw)
    fake = FakeTime()
    p.clock = fake.clock

    def sleep(seconds):
        # after the first failure the timeout is roomy again: how fast this machine answers
        # the good request can never decide the outcome
        p.timeout_s = 30.0
        fake.sleep(seconds)
    p.sleep = sleep
    return p, fake


def header(request: dict, name: str) -> str | None:
    return {k.lower(): v for k, v in request["headers"].items()}.get(name)


# --- transient failures, then an answer -------------------------------------------------------

@pytest.mark.parametrize("status", [500, 502, 503, 529, 429])
def test_status_errors_are_retried_until_the_answer(api, status):
    server = api([{"status": status}, {"status": status}, answer(GOOD)])
    p, fake = provider()
    reply = p.complete("sys", PROMPT, 1000)
    assert "class ModelNew" in reply.text and reply.stop_reason == "end_turn"
    assert len(server.requests) == 3                 # ours are the only retries: the SDK's are off
    assert fake.waits == [0.01, 0.01]                # the server's retry-after-ms: 10 was honoured


@pytest.mark.parametrize("fault", [
    pytest.param({"hang": 60}, id="timeout"),
    pytest.param({"reset": True}, id="connection-reset"),
    pytest.param({"cut": 40}, id="stream-ends-early"),
    pytest.param({"cut": 40, "chunked": True}, id="stream-cut-mid-chunk"),
    pytest.param({"stream_error": "overloaded_error"}, id="error-event-mid-stream"),
])
def test_timeouts_resets_and_half_streams_are_retried_as_a_whole_call(api, fault):
    server = api([fault, answer(GOOD)])
    p, fake = provider(first_timeout=0.5)            # a hang of 60 s always outlasts it
    reply = p.complete("sys", PROMPT, 1000)
    assert reply.text == answer(GOOD)["text"] and reply.stop_reason == "end_turn"
    assert len(server.requests) == 2
    assert len(fake.waits) == 1 and 0.75 <= fake.waits[0] <= 1.0    # base delay, with jitter


def test_plain_requests_are_retried_too(api):
    server = api([{"reset": True}, {"status": 529}, answer(GOOD)])
    p, _ = provider(stream=False)
    assert "class ModelNew" in p.complete("sys", PROMPT, 1000).text
    assert [r["body"].get("stream", False) for r in server.requests] == [False] * 3


def test_backoff_doubles_between_tries(api):
    server = api([{"reset": True}] * 3 + [answer(GOOD)])
    p, fake = provider()
    p.complete("sys", PROMPT, 1000)
    assert len(server.requests) == 4
    for n, wait in enumerate(fake.waits):
        assert 0.75 * 2 ** n <= wait <= 2 ** n


def test_retry_after_wins_over_backoff_and_is_capped(api):
    server = api([{"status": 429, "headers": {"retry-after": "7"}},
                  {"status": 503, "headers": {"retry-after": "3600"}}, answer(GOOD)])
    p, fake = provider()
    p.complete("sys", PROMPT, 1000)
    assert len(server.requests) == 3
    assert fake.waits == [7.0, MAX_DELAY]


# --- giving up --------------------------------------------------------------------------------

def test_failures_that_never_clear_end_in_a_clear_error(api):
    server = api([{"status": 503, "message": f"upstream echoed {KEY}"}] * 3)
    p, _ = provider(attempts=3)
    with pytest.raises(ProviderError) as caught:
        p.complete("sys", PROMPT, 1000)
    message = str(caught.value)
    assert "the Anthropic API failed: HTTP 503" in message
    assert "gave up after 3 attempts: attempts used up (3 allowed)" in message
    assert KEY not in message                        # even when the server echoes it
    assert len(server.requests) == 3


def test_a_server_that_cannot_be_reached_names_the_base_url(api):
    server = api([{"reset": True}] * 2)
    p, _ = provider(attempts=2)
    with pytest.raises(ProviderError, match="Connection reset by peer") as caught:
        p.complete("sys", PROMPT, 1000)
    assert "gave up after 2 attempts" in str(caught.value)
    assert "ANTHROPIC_BASE_URL" in str(caught.value) and KEY not in str(caught.value)
    assert len(server.requests) == 2


def test_a_timeout_that_never_clears_says_so(api):
    server = api([{"hang": 60}])
    p, _ = provider(first_timeout=0.5, attempts=1)
    with pytest.raises(ProviderError, match=r"no answer within the 0.5 s timeout; "
                                            r"gave up after 1 attempt:"):
        p.complete("sys", PROMPT, 1000)
    assert len(server.requests) == 1


def test_no_retry_once_the_runs_time_budget_would_end_first(api):
    server = api([{"reset": True}] * 5)
    p, fake = provider(attempts=5)
    deadline = fake.now + 2.2      # room for the first wait (<= 1 s), not the second (>= 1.5 s)
    with pytest.raises(ProviderError) as caught:
        p.complete("sys", PROMPT, 1000, deadline=deadline)
    message = str(caught.value)
    assert "gave up after 2 attempts: the run's wall-time budget ends before the next try" \
        in message
    assert len(server.requests) == 2 < p.attempts
    # each try's HTTP timeout is cut to the time left, never past the deadline
    timeouts = [float(header(r, "x-stainless-read-timeout")) for r in server.requests]
    assert timeouts[0] == pytest.approx(2.2)
    assert timeouts[1] == pytest.approx(2.2 - fake.waits[0])


def test_a_retry_after_longer_than_the_time_left_is_not_waited_for(api):
    server = api([{"status": 429, "headers": {"retry-after": "30"}}, answer(GOOD)])
    p, fake = provider()
    with pytest.raises(ProviderError, match=r"HTTP 429 .*gave up after 1 attempt: the run's "
                                            r"wall-time budget ends before the next try "
                                            r"\(due in 30.0 s\)"):
        p.complete("sys", PROMPT, 1000, deadline=fake.now + 10)
    assert len(server.requests) == 1 and fake.waits == []


def test_a_budget_already_spent_makes_no_call(api):
    server = api([answer(GOOD)])
    p, fake = provider()
    with pytest.raises(ProviderError, match="no call to the Anthropic API was made: the run's "
                                            "wall-time budget ended"):
        p.complete("sys", PROMPT, 1000, deadline=fake.now - 1)
    assert server.requests == []


@pytest.mark.parametrize("status, words", [
    (400, "the Anthropic API rejected the request (400): invalid_request_error: scripted"),
    (401, "the Anthropic API rejected the key (401): set ANTHROPIC_API_KEY to a valid key"),
    (403, "the Anthropic API refused the request (403): permission_error: scripted"),
    (404, "model 'claude-sonnet-4-6' not found (404): pass --model"),
])
def test_errors_retrying_cannot_fix_fail_at_once(api, monkeypatch, status, words):
    monkeypatch.delenv("KFORGE_MODEL", raising=False)
    server = api([{"status": status}, answer(GOOD)])
    p, fake = provider()
    with pytest.raises(ProviderError) as caught:
        p.complete("sys", PROMPT, 1000)
    assert words in str(caught.value) and KEY not in str(caught.value)
    assert len(server.requests) == 1 and fake.waits == []


# --- a session keeps what it made before the API gave out -------------------------------------

@pytest.mark.slow
def test_a_session_whose_api_gives_out_keeps_its_correct_candidate(api, tmp_path):
    # iteration 0 gets a correct kernel; the analysis call then meets 503 on all 5 tries
    server = api([answer(GOOD)] + [{"status": 503}] * 5)
    session = run_session(tmp_path, iterations=2)
    assert len(server.requests) == 6
    assert "HTTP 503" in session.error and "gave up after 5 attempts" in session.error
    assert session.finish_reason.startswith("provider error: the Anthropic API failed")
    assert [a.result.state for a in session.history] == ["correct"]
    saved = json.loads((Path(session.folder) / "run.json").read_text())
    assert [a["result"]["state"] for a in saved["history"]] == ["correct"]
    assert KEY not in json.dumps([e.to_dict() for e in session.events])


# --- the retry policy's arithmetic -----------------------------------------------------------

def test_backoff_and_retry_after_parsing():
    assert backoff(1, None, 1.0, 60.0) <= 1.0 and backoff(3, None, 1.0, 60.0) >= 3.0
    assert backoff(20, None, 1.0, 60.0) <= 60.0                    # capped
    assert backoff(1, 5.0, 1.0, 60.0) == 5.0 and backoff(1, 600.0, 1.0, 60.0) == 60.0
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({"retry-after": "9"}) == 9.0
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # past
    assert retry_after_seconds({}) is None and retry_after_seconds({"retry-after": "soon"}) is None


# --- damaged recordings -----------------------------------------------------------------------

def recorded_line(text: str = "```python\nclass ModelNew: pass\n```") -> str:
    return json.dumps({"call": 0, "role": "generation", "digest": request_digest("s", PROMPT),
                       "request": {"system": "s", "messages": PROMPT, "max_tokens": 10},
                       "reply": {"text": text, "input_tokens": 1, "output_tokens": 1,
                                 "stop_reason": "end_turn", "model": "m"}})


@pytest.mark.parametrize("content, words", [
    ("this is not a recording\n", "replay rec.jsonl line 1 is not valid JSON: Expecting value"),
    (recorded_line() + "\n" + recorded_line() + "\n" + recorded_line()[:60] + "\n",
     "replay rec.jsonl line 3 is not valid JSON: Unterminated string"),
    (recorded_line() + "\n\n" + json.dumps({"digest": "abc", "role": "generation"}) + "\n",
     "replay rec.jsonl line 3 lacks 'reply': not a kforge recording"),
    (json.dumps({"reply": {"text": "x"}}) + "\n", "replay rec.jsonl line 1 lacks 'digest'"),
    ("[1, 2]\n", "replay rec.jsonl line 1 is not a recorded call"),
    (json.dumps({"digest": "a", "reply": {"txt": "x"}}) + "\n",
     "replay rec.jsonl line 1 has a malformed reply"),
])
def test_a_damaged_recording_names_the_file_and_line(tmp_path, content, words):
    path = tmp_path / "rec.jsonl"
    path.write_text(content)
    with pytest.raises(ProviderError) as caught:
        ReplayProvider(path, "generation")
    assert words in str(caught.value)
    # and so does building a session's agents from it, before any call
    with pytest.raises(ProviderError, match="rec.jsonl line"):
        make_agents(AgentConfig(replay=str(path)))


def test_a_binary_file_is_not_a_recording(tmp_path):
    path = tmp_path / "rec.jsonl"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(ProviderError, match="replay rec.jsonl is not a text file"):
        ReplayProvider(path, "generation")


def test_a_sound_recording_still_replays(tmp_path):
    path = tmp_path / "rec.jsonl"
    path.write_text(recorded_line() + "\n")
    reply = ReplayProvider(path, "generation").complete("s", PROMPT, 10, deadline=0.0)
    assert "ModelNew" in reply.text
