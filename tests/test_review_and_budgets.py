"""Review mode asks about every recommendation, "done" included; budgets hold with several
samples a round. Driven by a scripted analyst and a scripted Messages API on 127.0.0.1, so no
outcome depends on the machine's speed."""
from __future__ import annotations

import threading

import pytest

from kforge_nb.agents import AgentConfig
from kforge_nb.agents.base import Recommendation
from kforge_nb.session import Budget, Session
from tests.test_session_anthropic import GOOD, PROBLEM, answer, api, options  # noqa: F401

pytestmark = pytest.mark.slow     # each test runs a session


class ScriptedAnalyst:
    """An analysis agent that answers from a list: what a rule set or a teacher would say."""

    def __init__(self, script: list[Recommendation]):
        self.script, self.asked = list(script), 0

    def analyse(self, request) -> Recommendation:
        self.asked += 1
        return self.script.pop(0)


DONE = Recommendation("no further change expected", "nothing left to try", action={"kind": "done"})


def review_session(tmp_path, analyst, iterations=3) -> Session:
    return Session(PROBLEM, "cpp", AgentConfig(provider="builtin", analyst=analyst),
                   Budget(iterations=iterations, patience=None), options(tmp_path),
                   mode="review", out=tmp_path)


def wait_for_events(session: Session, kind: str, count: int) -> None:
    done = threading.Event()
    while sum(e.kind == kind for e in session.events) < count:
        assert session.running, session.finish_reason
        done.wait(0.05)


def test_done_is_asked_in_review_mode_and_a_redirect_goes_on(tmp_path):
    analyst = ScriptedAnalyst([DONE, DONE])
    session = review_session(tmp_path, analyst).start()
    wait_for_events(session, "recommendation", 1)
    assert session.running                               # waiting for the person, not ended
    session.redirect("try one more layout anyway")
    wait_for_events(session, "recommendation", 2)
    session.accept()                                     # agreeing that nothing is left
    session.wait(600)
    assert [a.decision.kind if a.decision else None for a in session.history] == \
        [None, "redirect"]
    assert session.history[1].decision.text == "try one more layout anyway"
    assert session.finish_reason.endswith("you agreed")
    assert analyst.asked == 2


def test_done_ends_an_auto_session_without_asking(tmp_path):
    analyst = ScriptedAnalyst([DONE])
    session = Session(PROBLEM, "cpp", AgentConfig(provider="builtin", analyst=analyst),
                      Budget(iterations=3, patience=None), options(tmp_path), out=tmp_path)
    session.run()
    assert len(session.history) == 1
    assert session.finish_reason.startswith("the analyst has nothing further")


def test_concurrent_samples_do_not_overshoot_a_token_budget(api, tmp_path):  # noqa: F811
    per_call = {"input_tokens": 100, "output_tokens": 100}
    server = api([{**answer(GOOD), **per_call} for _ in range(4)])
    session = Session(PROBLEM, "cpp", AgentConfig(provider="anthropic"),
                      Budget(iterations=1, samples=4, tokens=500, patience=None),
                      options(tmp_path), out=tmp_path)
    session.run()
    # The first call alone sizes the estimate (200 tokens); then 200 + 2 x 200 > 500 refuses
    # a third: two calls, 400 tokens. Without reserving, all four would have gone (800).
    assert len(server.requests) == 2
    assert session.usage.input_tokens + session.usage.output_tokens == 400
    assert sum(e.kind == "notice" and "not asked for" in e.data.get("text", "")
               for e in session.events) == 2


def test_a_cost_budget_holds_exactly_the_analysts_call_included(api, tmp_path):  # noqa: F811
    # claude-sonnet-4-6 at $3 / $15 per million tokens: 100k in + 10k out = $0.45 a call.
    per_call = {"input_tokens": 100_000, "output_tokens": 10_000}
    server = api([{**answer(GOOD), **per_call},
                  {"text": "TITLE: chunk\nRECOMMENDATION: schedule(static, 4)", **per_call},
                  {**answer(GOOD), **per_call}, {**answer(GOOD), **per_call}])
    session = Session(PROBLEM, "cpp", AgentConfig(provider="anthropic"),
                      Budget(iterations=4, cost_usd=1.0, patience=None),
                      options(tmp_path), out=tmp_path)
    session.run()
    # generation ($0.45), analysis ($0.90 in all); a third call would make $1.35 > $1: not made
    assert len(server.requests) == 2
    assert round(session.usage.cost_usd, 4) == 0.90
    assert session.finish_reason.startswith("cost budget ($1) would not cover another call")
    assert [a.result.state for a in session.history] == ["correct"]


class ScriptedClock:
    """Wall time that moves only when told: 100 s per judged candidate."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def on_event(self, event) -> None:
        if event.kind == "evaluated":
            self.now += 100.0


def test_a_wall_time_budget_ends_the_run_between_rounds(tmp_path):
    clock = ScriptedClock()
    again = Recommendation("again", "the same kernel once more", action={"kind": "none"})
    session = Session(PROBLEM, "cpp", AgentConfig(provider="builtin",
                                                  analyst=ScriptedAnalyst([again] * 4)),
                      Budget(iterations=5, wall_s=150, patience=None), options(tmp_path),
                      out=tmp_path, clock=clock)
    session.subscribe(clock.on_event)
    session.run()
    # 100 s after the first candidate (under 150: go on), 200 s after the second (stop)
    assert len(session.history) == 2
    assert session.finish_reason == "time budget (150 s) used"
    assert session.summary()["elapsed_s"] == 200.0


def test_requests_carry_the_deadline_of_the_wall_time_budget(tmp_path):
    import time as real_time
    seen = []

    class Watching(ScriptedAnalyst):
        def analyse(self, request):
            seen.append(request.deadline - real_time.monotonic())
            return super().analyse(request)
    clock = ScriptedClock()
    done = Recommendation("stop", "nothing", action={"kind": "done"})
    session = Session(PROBLEM, "cpp", AgentConfig(provider="builtin", analyst=Watching([done])),
                      Budget(iterations=3, wall_s=150, patience=None), options(tmp_path),
                      out=tmp_path, clock=clock)
    session.subscribe(clock.on_event)
    session.run()
    # asked after one candidate (100 s of 150 used): at most 50 s left for the call's retries
    assert len(seen) == 1 and 0 < seen[0] <= 50.0
