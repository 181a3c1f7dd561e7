"""A run folder holds every candidate's code where its round left it (issue 38): a candidate
whose code repeats an earlier one's is not judged again, yet its folder has its candidate.py and
says whose verdict it took. Real evaluations of the shipped C++ example."""
from __future__ import annotations

import json

from kforge_nb.evaluator import EvalOptions
from kforge_nb.result import CORRECT
from kforge_nb.session import Session
from tests.test_session_anthropic import GOOD, PROBLEM


def test_a_repeated_candidates_folder_has_its_code_and_names_the_verdict_it_took(tmp_path):
    s = Session(PROBLEM, "cpp", out=tmp_path, options=EvalOptions(
        baselines=("eager",), out_dir=tmp_path, trials=1, timing_budget_s=0.2))
    first = s.evaluate_code(GOOD)
    again = s.evaluate_code("# the same kernel, a comment added\n" + GOOD)
    assert first.result.state == CORRECT and again.same_as == first.id
    folder = s.folder / f"iter-{again.iteration:02d}" / f"sample-{again.sample}"
    assert (folder / "candidate.py").read_text() == again.code
    said = json.loads((folder / "same_as.json").read_text())
    assert said["same_as"] == first.id and said["state"] == CORRECT
    assert (s.folder / said["verdict"]).is_file()          # the verdict it took, judged once
    assert not (folder / "result.json").exists()
