"""The builtin agent answers a person's free text clause by clause (issue 30, part 5): each
clause a knob answers is applied (or said to be already so), each other clause is said to be
not applied, and an edit asking for two known changes applies both. The answer is in the
generation's notes and response, which the views show."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from kforge_nb.agents.base import GenerationRequest
from kforge_nb.agents.builtin import BuiltinGenerator
from kforge_nb.agents.builtin.candidate import read_header
from kforge_nb.agents.builtin.sweep import kernel_text
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
    assert "not applied: unroll the inner loops by 4 (the builtin agent cannot do this: it " \
        "writes each kernel one way and turns a few knobs)" in made.notes
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
    assert "not applied: make it faster please (the builtin agent cannot do this" in made.notes
    assert read_header(made.code)["options"] == read_header(parent)["options"]


@pytest.mark.slow
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
    session.wait(600)
    said = "not applied: unroll the inner loops by 4 (the builtin agent cannot do this: it " \
        "writes each kernel one way and turns a few knobs)"
    generated = [e for e in session.events if e.kind == "candidate_generated"][-1]
    assert said in generated.data["notes"]
    record = run_record(session)
    assert said in record["history"][-1]["agent_notes"]
    assert record["history"][-1]["decision_text"] == \
        "unroll the inner loops by 4 and use 512-bit vectors"
    out = io.StringIO()
    Progress(out)(generated)
    assert out.getvalue().startswith("[1.0] agent: applied: vector_width set to 512")
    assert said in out.getvalue()


# --- "applied" is true of the code; what it cannot do is said whole, with what it can (issue 38)

PROBLEMS = Path(__file__).parent / "problems"
RELU = Problem.from_file(PROBLEMS / "relu.py")          # one flat loop: no row schedule
ROW_STATS = Problem.from_string('''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        return (x - mean) / torch.sqrt(x.var(dim=-1, keepdim=True, unbiased=False) + 1e-5)


def get_inputs():
    return [torch.randn(64, 1024)]
''', "row_stats")


def first_and_edited(problem: Problem, words: str):
    parent = BuiltinGenerator().generate(GenerationRequest(problem, "cpp", "initial")).code
    made = BuiltinGenerator().generate(GenerationRequest(
        problem, "cpp", "optimise", iteration=1, previous_code=parent, instruction=words))
    return parent, made


def test_a_knob_the_kernel_has_no_loop_for_is_not_said_applied():
    """A flat elementwise loop has no row schedule: asking for a dynamic one changes nothing,
    and the answer says so instead of "applied" (the header does not claim it either)."""
    parent, made = first_and_edited(RELU, "Use a dynamic OpenMP schedule")
    assert "applied: schedule" not in made.notes.replace("not applied:", "")
    assert "not applied: schedule set to dynamic (the builtin agent cannot apply it here: no " \
        "loop of the kernel it writes for this problem takes that knob" in made.notes
    assert kernel_text(made.code) == kernel_text(parent)
    assert read_header(made.code)["options"]["schedule"] == "static"


def test_an_applied_knob_changes_the_kernels_code():
    parent, made = first_and_edited(ROW_STATS, "Use a dynamic OpenMP schedule")
    assert "applied: schedule set to dynamic" in made.notes
    assert "schedule(dynamic)" in made.code and "schedule(dynamic)" not in parent


def test_words_no_knob_answers_are_said_whole_with_the_words_that_would_change_the_kernel():
    words = "compute the row mean and variance in one pass (Welford)"
    parent, made = first_and_edited(ROW_STATS, words)
    assert f"not applied: {words} (the builtin agent cannot do this" in made.notes
    assert "not applied: compute the row mean (" not in made.notes        # not cut at "and"
    offered = re.findall(r'"([^"]+)"', made.notes.split("What it can change in this kernel")[1])
    assert "use a dynamic schedule" in offered and "accumulate in double" in offered
    assert kernel_text(made.code) == kernel_text(parent)
    for phrase in offered:          # each offer, sent back, really changes this kernel
        _, again = first_and_edited(ROW_STATS, phrase)
        assert "applied: " in again.notes.replace("not applied:", ""), phrase
        assert kernel_text(again.code) != kernel_text(parent), phrase


def test_every_phrase_offered_is_one_the_agent_reads():
    from kforge_nb.agents.builtin.actions import SAYABLE, parse_action
    assert all(parse_action(words)["kind"] != "none" for words in SAYABLE)


@pytest.mark.slow
def test_kforge_run_review_says_an_edit_that_changes_nothing_was_not_applied(tmp_path):
    """`kforge run --review` as a person uses it: a real CLI process, the edit typed on its
    standard input. The agent's line says the schedule was not applied before the verdict
    says the code repeats its parent's."""
    import os
    import subprocess
    import sys
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    env.pop("ANTHROPIC_API_KEY", None)
    done = subprocess.run(
        [sys.executable, "-m", "kforge_nb.cli", "run", str(PROBLEMS / "relu.py"), "--target",
         "cpp", "--provider", "builtin", "--review", "--iterations", "2", "--trials", "1",
         "--no-compile-baseline", "--out", str(tmp_path / "runs")],
        input="e\nUse a dynamic OpenMP schedule\n", capture_output=True, text=True,
        timeout=600, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    agent = next(line for line in done.stderr.splitlines() if line.startswith("[1.0] agent:"))
    assert agent.startswith("[1.0] agent: not applied: schedule set to dynamic (the builtin "
                            "agent cannot apply it here")
    verdict = next(line for line in done.stderr.splitlines() if line.startswith("[1.0] correct"))
    assert "same as 0.0: not judged again" in verdict
    assert done.stderr.index(agent) < done.stderr.index(verdict)
