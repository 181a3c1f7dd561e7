"""Large problems get a verdict in bounded time (issue 27): the comparison's quick pass agrees
with its exact pass, outputs are compared as they are read from the candidate's file, trials
of a distribution already tried are skipped on large data, each step is told as it ends, and
the outputs cross in memory, never left behind."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from kforge_nb.evaluator.sandbox import layout
from kforge_nb.evaluator.wire import transfer
from kforge_nb.evaluator.worker import correctness
from kforge_nb.result import Correctness


def both_passes(r, c, policy="strict"):
    """The verdict and report of the quick pass (as judged) and of the exact pass alone."""
    quick, exact = Correctness(), Correctness()
    got = correctness.compare_values(r, c, policy, quick)
    saved = correctness.within_tolerance
    correctness.within_tolerance = lambda *args: None          # force the exact pass
    try:
        want = correctness.compare_values(r, c, policy, exact)
    finally:
        correctness.within_tolerance = saved
    return got, want, quick, exact


CASES = {
    "equal": lambda r: r.clone(),
    "within rounding": lambda r: r * (1 + 3e-7),
    "one value out": lambda r: r.clone().index_put_((torch.tensor([7]),), torch.tensor([99.0])),
    "all a little out": lambda r: r + 1e-2,
    "a NaN": lambda r: r.clone().index_put_((torch.tensor([3]),), torch.tensor(float("nan"))),
    "zeros for a small answer": lambda r: torch.zeros_like(r),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_the_quick_pass_gives_the_exact_pass_verdict(case, dtype):
    r = torch.randn(5000, generator=torch.Generator().manual_seed(1)).to(dtype)
    if case == "zeros for a small answer":
        r = r * 1e-6
    c = CASES[case](r.float()).to(dtype)
    got, want, quick, exact = both_passes(r, c)
    assert got[0] == want[0], (got, want)
    if got[0]:
        assert quick.max_abs_error == pytest.approx(exact.max_abs_error, rel=1e-3, abs=1e-12)
        assert quick.rel_norm_error == pytest.approx(exact.rel_norm_error, rel=1e-3, abs=1e-12)


def test_a_finite_answer_where_the_reference_is_infinite_is_wrong():
    """rtol x inf allowed any finite value where the reference was inf."""
    r = torch.tensor([float("inf"), 1.0, -float("inf")])
    ok, text = correctness.compare_values(r, torch.tensor([5.0, 1.0, -float("inf")]), "strict",
                                          Correctness())
    assert not ok and "outside" in text
    assert correctness.compare_values(r, r.clone(), "strict", Correctness())[0]


def test_integer_outputs_compare_exactly_and_name_the_difference():
    r = torch.arange(10)
    assert correctness.compare_values(r, r.clone(), "strict", Correctness()) == (True, "")
    ok, text = correctness.compare_values(r, r.clone().index_put_((torch.tensor([4]),),
                                                                  torch.tensor(7)),
                                          "strict", Correctness())
    assert not ok and "at [4]: got 7, expected 4" in text


def test_outputs_streamed_from_the_file_judge_as_the_tensors_do(tmp_path):
    """Chunks smaller than the output: the comparison walks the file a piece at a time."""
    r = torch.randn(3, 70_001)
    wrong = r.clone()
    wrong[2, 69_999] += 1.0
    for c, expected in ((r * (1 + 1e-7), True), (wrong, False)):
        path = str(tmp_path / "out.bin")
        transfer.write_tensors(path, [c, torch.arange(5)])
        saved = correctness.CHUNK
        correctness.CHUNK = 4096
        try:
            with transfer.open_outputs(path) as streamed:
                report = Correctness()
                ok, text = correctness.compare_outputs([r, torch.arange(5)], streamed,
                                                       "strict", report)
        finally:
            correctness.CHUNK = saved
        assert ok is expected, text
        if not expected:
            assert report.worst[0]["index"] == [2, 69_999]


def test_an_output_the_header_calls_not_a_tensor_is_a_mismatch_not_a_crash(tmp_path):
    path = tmp_path / "forged.bin"
    path.write_bytes(json.dumps([None]).encode() + b"\n")
    with transfer.open_outputs(str(path)) as streamed:
        ok, text = correctness.compare_outputs([torch.ones(2)], streamed, "strict",
                                               Correctness())
    assert not ok and "not a tensor" in text


def test_a_large_problem_runs_one_trial_per_distribution_and_says_each_step(options, monkeypatch):
    """The threshold lowered so that a small ReLU counts as large: trial 6 (a second `given`
    draw) is skipped and said; the tails trial (5) and the shape check still run."""
    import kforge_nb.evaluator as evaluator
    from kforge_nb.evaluator.parent import protocol
    from kforge_nb.result import CORRECT
    from tests.support.evaluator import candidate_source, load_problem
    monkeypatch.setattr(protocol, "LARGE_TRIAL_BYTES", 1)   # where the protocol reads it
    said: list[str] = []
    result = evaluator.evaluate(load_problem("relu"), candidate_source("cpp_relu"), "cpp",
                                options(measure=False, trials=6), progress=said.append)
    assert result.state == CORRECT, result.message
    assert "matches the reference on 6 trials" in result.message
    assert "trial 6 skipped: a given draw again" in result.message
    assert said[0].startswith("built and constructed (")
    assert [line.split(" (")[0] for line in said[1:7]] == [
        "trial 1 of 7 matches", "trial 2 of 7 matches", "trial 3 of 7 matches",
        "trial 4 of 7 matches", "trial 5 of 7 matches", "trial 7 of 7 matches"]
    assert said[-1].startswith("trials (")


def test_outputs_cross_in_memory_and_the_exchange_is_gone_afterwards(options, monkeypatch):
    """Every output file the candidate was asked to write lies in memory (/dev/shm) where the
    machine has it; the folder is removed when the judging ends."""
    import kforge_nb.evaluator as evaluator
    from kforge_nb.evaluator.parent import protocol
    from kforge_nb.result import CORRECT
    from tests.support.evaluator import candidate_source, load_problem
    asked: list[str] = []
    real = protocol.Evaluation.exchange_path
    monkeypatch.setattr(protocol.Evaluation, "exchange_path",
                        lambda self, name: asked.append(real(self, name)) or asked[-1])
    result = evaluator.evaluate(load_problem("relu"), candidate_source("cpp_relu"), "cpp",
                                options())
    assert result.state == CORRECT, result.message
    memory = layout.memory_exchange(Path(result.artifacts))
    assert asked and any(name.startswith("trial") for name in map(lambda p: Path(p).name, asked))
    if memory is not None:
        assert all(Path(p).parent == memory for p in asked), asked
        assert not memory.exists()


def test_a_memory_exchange_left_by_a_killed_process_is_removed(tmp_path):
    import subprocess
    import sys
    probe = layout.memory_exchange(tmp_path)
    if probe is None:
        pytest.skip("no /dev/shm here: outputs cross through the run folder")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = probe.parent / "kforge-exchange-left-by-a-killed-run"
    stale.mkdir(exist_ok=True)
    (stale / ".owner").write_text(str(dead.pid))
    (stale / "trial0.bin").write_bytes(b"x" * 1024)
    made = layout.make_memory_exchange(tmp_path)
    try:
        assert not stale.exists()
        assert (made / ".owner").read_text() == str(__import__("os").getpid())
    finally:
        __import__("shutil").rmtree(made, ignore_errors=True)



def test_another_users_stale_exchange_is_left_to_them(tmp_path):
    """/dev/shm is shared and sticky: a user beside root's runs crashed (PermissionError) on
    removing the exchange link a killed run of root's had left there. An exchange whose link
    or folder another user owns is now left to that user, whoever looks."""
    import os
    import subprocess
    import sys
    probe = layout.memory_exchange(tmp_path)
    if probe is None or os.geteuid() != 0:
        pytest.skip("needs /dev/shm and root, to leave an exchange of another user's there")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = probe.parent / "kforge-exchange-another-users-killed-run"
    stale.unlink(missing_ok=True)
    stale.symlink_to(f"/proc/{dead.pid}/root/dev/shm/kforge-exchange")
    os.lchown(stale, 65534, 65534)
    made = layout.make_memory_exchange(tmp_path)
    try:
        assert stale.is_symlink()                        # its owner's to remove, not ours
        assert (made / ".owner").read_text() == str(os.getpid())
    finally:
        stale.unlink(missing_ok=True)
        layout.remove_exchange(made)
