"""How a run ends (session/finish.py): a kind for code, a sentence for the person; and what was
asked (the options, the agents config) is never written to by the run (session/spec.py).

Each run is a real session: the real evaluator judges the C++ softmax of the examples, the model
is a scripted Messages API on 127.0.0.1. No outcome depends on the machine's speed: the target
speedup asked for is one any timed kernel reaches."""
from __future__ import annotations

import dataclasses
import json

import pytest

from kforge_nb.agents import AgentConfig
from kforge_nb.bench.runner import row_for
from kforge_nb.evaluator import EvalOptions
from kforge_nb.session import Budget, Session
from kforge_nb.session.finish import (BAD_INPUT, BUDGET, KINDS, STOPPED, TARGET, Finish,
                                      on_error)
from tests.test_session_anthropic import GOOD, PROBLEM, answer, api  # noqa: F401 (fixture)


def finished_events(session: Session) -> list[dict]:
    """The `finished` events as events.jsonl recorded them."""
    lines = (session.folder / "events.jsonl").read_text().splitlines()
    return [e["data"] for e in map(json.loads, lines) if e["kind"] == "finished"]


def a_session(tmp_path, budget: Budget, options: EvalOptions | None = None,
              agents: AgentConfig | None = None, target: str = "cpp") -> Session:
    return Session(PROBLEM, target, agents or AgentConfig(provider="anthropic"), budget,
                   options or EvalOptions(baselines=("eager",), out_dir=tmp_path, trials=2),
                   out=tmp_path)


def test_a_run_that_uses_its_iterations_ends_on_its_budget_and_records_the_kind(api, tmp_path):
    api([answer(GOOD)])
    session = a_session(tmp_path, Budget(iterations=1, patience=None))
    best = session.run()
    assert best is not None and best.result.state == "correct"
    assert session.finish == Finish(BUDGET, "iteration budget used")
    assert session.finish_reason == "iteration budget used" and session.error is None
    [finished] = finished_events(session)
    assert finished["finish_kind"] == BUDGET and finished["reason"] == "iteration budget used"


def test_a_target_speedup_reached_is_told_apart_from_a_used_budget(api, tmp_path):
    # any timed kernel is faster than a millionth of eager's speed: the first correct one ends
    # the run before the second iteration asks for anything
    server = api([answer(GOOD), answer(GOOD)])
    session = a_session(tmp_path, Budget(iterations=3, target_speedup=1e-6, patience=None))
    session.run()
    assert session.finish == Finish(TARGET, "target speedup 1e-06x reached")
    assert len(server.requests) == 1 and finished_events(session)[0]["finish_kind"] == TARGET


def test_the_options_and_agents_config_passed_in_are_not_written_to(api, tmp_path):
    api([answer(GOOD)])
    options = EvalOptions(baselines=("eager",), out_dir=tmp_path, trials=2, precision="tf32")
    agents = AgentConfig(provider="anthropic")
    as_given = dataclasses.replace(options), dataclasses.replace(agents)
    session = a_session(tmp_path, Budget(iterations=1, patience=None), options, agents)
    session.run()
    assert (options, agents) == as_given          # out_dir and precision as they were given
    assert options.out_dir == tmp_path and agents.precision == "strict"
    # what the run used: its own folder, and agents that write for the options' precision
    assert session.options.out_dir == session.folder != tmp_path
    assert session.generator.precision == "tf32"


def test_a_stop_before_the_run_is_a_stopped_finish_and_asks_no_model(api, tmp_path):
    server = api([answer(GOOD)])
    session = a_session(tmp_path, Budget(iterations=2))
    session.stop()
    session.run()
    assert session.finish == Finish(STOPPED, "stopped by the user")
    assert server.requests == [] and session.history == []


def test_a_target_this_machine_cannot_build_is_a_bad_input_row_in_a_bench(api, tmp_path):
    import torch
    if torch.backends.mps.is_available():
        pytest.skip("MPS is here: metal builds")
    server = api([answer(GOOD)])
    session = a_session(tmp_path, Budget(iterations=2), target="metal")
    session.run()
    assert session.finish.kind == BAD_INPUT and session.finish.failed
    assert session.finish.text == f"bad input: {session.error}"
    assert server.requests == []
    # the bench reads the kind, not the sentence
    row = row_for("softmax", session, 1.0)
    assert row.state == "bad_problem" and row.note == session.error[:200]


def test_a_finish_of_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown kind of finish 'engine error'"):
        Finish("engine error", "engine error: the workers went away")
    assert on_error("engine_error", "the workers went away") == Finish(
        "engine_error", "engine error: the workers went away", "the workers went away")
    assert {"budget", "target", "patience", "stopped", "engine_error"} <= KINDS
