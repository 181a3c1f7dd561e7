"""The rival: the best so far timed beside the candidate in the same rounds, in a sandboxed
worker of its own, with real g++ builds. Its differences are sleeps of tens of milliseconds a
call (a load adds time to both sides' slow calls; a block's low calls stay), so no outcome
here depends on this machine's speed or load. A rival that crashes, or whose timed output is
wrong, voids the head-to-head and never the candidate's verdict."""
from __future__ import annotations

from kforge_nb.result import CORRECT
from tests.support.evaluator import candidate_source

RELU = candidate_source("cpp_relu")


def sleeping(ms: float) -> str:
    return RELU.replace("import torch\n", "import time\n\nimport torch\n", 1).replace(
        "        x = x.contiguous()\n", f"        time.sleep({ms / 1000})\n"
        "        x = x.contiguous()\n", 1)


def test_a_candidate_timed_beside_a_slower_rival_is_faster_side_by_side(judge, tmp_path):
    result = judge("relu", "cpp_relu", rival=sleeping(20), rival_id="0.0")
    assert result.state == CORRECT, result.message
    versus = result.timing.versus
    assert versus["id"] == "0.0" and versus["verdict"] == "faster", versus
    assert versus["ratio"] > 5 and versus["ci"][0] > 1 and versus["rounds"] >= 6
    assert versus["rival_ms"] >= 20
    # the rival ran in its own folder beside the candidate's, sandboxed like it
    folder = tmp_path / "runs"
    assert [p.read_text() for p in folder.rglob("rival/candidate.py")] == [sleeping(20)]


def test_the_same_pair_the_other_way_round_is_slower(options):
    from kforge_nb.evaluator import evaluate
    from tests.support.evaluator import load_problem
    worse = evaluate(load_problem("relu"), sleeping(20), "cpp", options(rival=RELU,
                                                                        rival_id="1.0"))
    assert worse.state == CORRECT and worse.timing.versus["verdict"] == "slower"
    assert worse.timing.versus["ratio"] < 0.2


def test_a_rival_that_crashes_voids_the_head_to_head_not_the_verdict(judge):
    crashing = candidate_source("cpp_says_then_crashes")
    result = judge("relu", "cpp_relu", rival=crashing, rival_id="0.0")
    assert result.state == CORRECT, result.message
    versus = result.timing.versus
    assert versus["verdict"] == "void" and versus["id"] == "0.0"
    assert "SIGSEGV" in versus["why"] or "stopped" in versus["why"], versus
    assert result.timing.speedup_vs_eager and result.timing.real


def test_a_rival_whose_timed_output_is_wrong_is_said_to_be(judge):
    wrong = RELU.replace('y[i] = x[i] > 0.0f ? x[i] : 0.0f;', 'y[i] = x[i] > 0.0f ? x[i] : 1.0f;')
    result = judge("relu", "cpp_relu", rival=wrong, rival_id="0.0")
    assert result.state == CORRECT
    versus = result.timing.versus
    assert versus["verdict"] == "void" and versus.get("rival_wrong") is True, versus
    assert "was wrong" in versus["why"]


def test_a_rival_that_works_while_the_candidate_is_timed_voids_the_head_to_head(judge):
    """The best so far slowing the candidate down (threads left spinning) to stay best: its
    process tree's CPU while the others are timed is read around every block."""
    from tests.adversarial.support import source
    result = judge("relu", "cpp_relu", rival=source("cpp_relu_spins_while_others_time"),
                   rival_id="0.0")
    assert result.state == CORRECT, result.message
    versus = result.timing.versus
    assert versus["verdict"] == "void" and "cores busy while the candidate was timed" in \
        versus["why"], versus
    assert result.resources["outside_cores"]["candidate"] < 0.03
