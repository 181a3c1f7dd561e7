"""Round six of the trust boundary: a kernel that tells a timed call from a trial by its inputs
and breaks, only where it is timed, a rule the trials enforce.

The trials fingerprint a candidate's inputs before and after its call; the timed calls did not.
They rotate over a few input sets refilled in place before each call, so within a block the
same tensor objects come back (a trial's never do), and the refill undoes whatever a call wrote
over them. A ReLU that writes its answer over its input in exactly those calls
(candidates/r6_cpp_relu_in_place_when_timed.py) returned right values everywhere and was
judged `correct` with the time of a kernel the trials refuse: no output allocated, half the
memory touched. Now each kept timed call's inputs are fingerprinted the moment it returns,
before the refill, and the judge compares them with that call's inputs as drawn.

EXPLOITS and RUNS_HERE are real candidates judged by the real evaluator (benchmarks/redteam.py
runs them through `kforge eval` too); the test below runs the attacker as the rival, whose
head-to-head the same check voids.
"""
from __future__ import annotations

import re

import pytest

from kforge_nb.evaluator import evaluate
from kforge_nb.result import CORRECT, MISMATCH
from tests.adversarial.support import assert_runs_here, assert_verdict, problem, source
from tests.adversarial.test_exploits import Case, judge_case  # noqa: F401  (a fixture)

IN_PLACE = r"input 0 was modified in place by timed call \d+"

EXPLOITS = {
    "ReLU written over the input in timed calls only (a set seen before), 8x64": Case(
        "relu", "r6_cpp_relu_in_place_when_timed", MISMATCH, says_re=IN_PLACE),
    "ReLU written over the input in timed calls only (a set seen before), 16 MiB": Case(
        "r6_relu_16mb", "r6_cpp_relu_in_place_when_timed", MISMATCH, says_re=IN_PLACE),
}

# name -> (problem, candidate, target, native calls over the trials): honest, and still correct
# with the kept calls' inputs compared
RUNS_HERE = {
    "an honest ReLU over 16 MiB: its kept timed calls left their inputs alone":
        ("r6_relu_16mb", "cpp_relu", "cpp", "native x6"),
}


@pytest.mark.parametrize("name", list(EXPLOITS))
def test_round6_exploit_gets_its_verdict(name, judge_case):  # noqa: F811
    assert_verdict(name, EXPLOITS[name], judge_case(EXPLOITS[name]))


@pytest.mark.parametrize("name", list(RUNS_HERE))
def test_round6_runs_here_is_correct(name, options):
    assert_runs_here(RUNS_HERE[name], options)


def test_a_rival_that_writes_over_its_timed_inputs_voids_the_head_to_head(options):
    """The best so far is timed beside the candidate and its kept calls checked as the
    candidate's are: one that writes over its inputs when timed is no rival (the session drops
    it), and the honest candidate's verdict stands."""
    result = evaluate(problem("relu"), source("cpp_relu"), "cpp",
                      options(rival=source("r6_cpp_relu_in_place_when_timed"), rival_id="0.0"))
    assert result.state == CORRECT, result.message
    versus = result.timing.versus
    assert versus["verdict"] == "void", versus
    assert re.search(r"its output of timed call \d+ was wrong: input 0 was modified in place",
                     versus["why"]), versus
