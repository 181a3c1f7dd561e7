"""The builtin agent answers a person's free text clause by clause (issue 30, part 5): each
clause a knob answers is applied (or said to be already so), each other clause is said to be
not applied, and an edit asking for two known changes applies both. The answer is in the
generation's notes and response, which the views show."""
from __future__ import annotations

from pathlib import Path

from kforge_nb.agents.base import GenerationRequest
from kforge_nb.agents.builtin import BuiltinGenerator
from kforge_nb.agents.builtin.candidate import read_header
from kforge_nb.problem import Problem

SOFTMAX = Problem.from_file(Path(__file__).parent.parent / "kforge_nb" / "targets" / "examples"
                            / "softmax.py")


def parent_code() -> str:
    return BuiltinGenerator().generate(GenerationRequest(SOFTMAX, "cpp", "initial")).code


def optimise(words: str, previous: str):
    return BuiltinGenerator().generate(GenerationRequest(
        SOFTMAX, "cpp", "optimise", iteration=1, previous_code=previous, instruction=words))


def test_an_unknown_clause_is_said_not_applied_and_the_known_one_applied():
    parent = parent_code()
    made = optimise("unroll the inner loops by 4 and use 512-bit vectors", parent)
    assert "not applied: unroll the inner loops by 4 (the builtin agent has no knob for it)" \
        in made.notes
    assert "applied: vector_width set to 512" in made.notes
    assert "vector_math" not in made.notes              # not the knob that was already on
    assert "not applied: unroll the inner loops by 4" in made.response
    assert read_header(made.code)["options"]["vector_width"] == 512
    assert made.code != parent


def test_two_known_changes_are_both_applied():
    made = optimise("use a dynamic schedule and accumulate in double", parent_code())
    options = read_header(made.code)["options"]
    assert (options["schedule"], options["accumulate"]) == ("dynamic", "double")
    assert "applied: schedule set to dynamic" in made.notes
    assert "applied: accumulate set to double" in made.notes


def test_a_change_that_is_already_so_is_said_so():
    parent = parent_code()
    made = optimise("use vectorised maths", parent)
    assert "already so: vector_math is True" in made.notes
    assert "applied:" not in made.notes.replace("not applied:", "")


def test_words_with_no_knob_at_all_change_nothing_and_say_so():
    parent = parent_code()
    made = optimise("make it faster please", parent)
    assert made.notes.endswith(
        "not applied: make it faster please (the builtin agent has no knob for it)")
    assert read_header(made.code)["options"] == read_header(parent)["options"]


def test_a_person_edit_in_review_mode_is_answered_where_they_look(tmp_path):
    """A real session in review mode: the edit's answer reaches the candidate_generated event,
    the run record the notebook view draws, and the CLI's progress line."""
    import io

    from kforge_nb.agents import AgentConfig
    from kforge_nb.evaluator import EvalOptions
    from kforge_nb.session import Budget, Session
    from kforge_nb.ui.report import run_record
    from kforge_nb.ui.terminal import Progress
    from tests.test_magic import wait_for
    session = Session(SOFTMAX, "cpp", AgentConfig(provider="builtin"),
                      Budget(iterations=2, patience=None),
                      EvalOptions(baselines=("eager",), out_dir=tmp_path, trials=1),
                      mode="review", out=tmp_path).start()
    wait_for(session, "recommendation")
    session.edit("unroll the inner loops by 4 and use 512-bit vectors")
    session.wait(120)
    said = "not applied: unroll the inner loops by 4 (the builtin agent has no knob for it)"
    generated = [e for e in session.events if e.kind == "candidate_generated"][-1]
    assert said in generated.data["notes"]
    record = run_record(session)
    assert said in record["history"][-1]["agent_notes"]
    assert record["history"][-1]["decision_text"] == \
        "unroll the inner loops by 4 and use 512-bit vectors"
    out = io.StringIO()
    Progress(out)(generated)
    assert out.getvalue().startswith("[1.0] agent: applied: vector_width set to 512")
    assert out.getvalue().rstrip().endswith(said)
