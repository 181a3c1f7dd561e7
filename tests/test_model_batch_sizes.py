"""A part's kernel is kept in a whole model only where it holds at the batch sizes the model
calls it with (issue 36, item 6).

The recomposed model is called at any batch size (the evaluator's own end-to-end check uses
another one), but a part's session judges its kernel at the part's own shapes. On KernelBench's
RegNet a part's kernel held only at the batch size it was built for, and the end-to-end verdict
caught it. Here the decomposition writes each part again at the shapes the model hands it at
its other batch size, and a part's kernel is judged there (with a trial at another batch size
of its own) before the recomposition takes it.

The model below hands its softmax part twice its batch (a `cat` along the batch): built at 16
rows, the part's own other batch size is 9, but the model at its other batch size (5) hands it
10 rows. The kernel under test has a real-looking tail bug (blocks of 8 rows, a tail of one
row), so it is correct at 16 and 9 and wrong at 10. It comes from a scripted Messages API on
127.0.0.1 (the real `anthropic` SDK, a real session, g++ builds, the real evaluator).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from kforge_nb.model.session import decompose
from kforge_nb.problem import Problem
from tests.test_session_anthropic import GOOD, answer, api  # noqa: F401  (fixture)

PAIRS = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(32, 32)

    def forward(self, x):
        both = torch.cat([self.proj(x), x], dim=0)     # the softmax part gets 2x the batch
        return torch.softmax(both, dim=-1)


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
'''
FIXED_BATCH = PAIRS.replace("torch.cat([self.proj(x), x], dim=0)",
                            "torch.cat([self.proj(x), x], dim=0).view(16, 4, 8)")

# cpp_softmax.py launched over whole blocks of 8 rows and a tail of one row: a tail of 2 or more
# rows is left at zero. 16 rows (its build size) and 9 (its own other batch size) come out
# right; 10 (where the model at batch 5 calls it) does not.
LAUNCH = "kernels.softmax_rows(x, y, x.numel() // cols, cols)"
TAIL_OF_ONE = GOOD.replace("y = torch.empty_like(x)", "y = torch.zeros_like(x)").replace(
    LAUNCH, "rows = x.numel() // cols\n"
            "        kernels.softmax_rows(x, y, rows - rows % 8 + min(rows % 8, 1), cols)")
assert TAIL_OF_ONE != GOOD and LAUNCH in GOOD


def model_file(tmp_path: Path, source: str = PAIRS) -> Problem:
    path = tmp_path / "pairs.py"
    path.write_text(source)
    return Problem.from_file(path)


def test_each_part_is_written_again_at_the_shapes_of_the_models_other_batch_size(tmp_path):
    found = decompose(model_file(tmp_path), "cpu", tmp_path / "decomposition")
    assert found["batch"] == {"build": 8, "other": 5}         # the evaluator's rule: 8 // 2 + 1
    parts = {p["label"]: p for p in found["parts"]}
    assert [v["shapes"] for v in parts["linear -> cat"]["other_batch"]] == [[[5, 32]]]
    softmax = parts["softmax"]
    assert [v["shapes"] for v in softmax["other_batch"]] == [[[10, 32]]]
    at_five = Problem.from_file(softmax["other_batch"][0]["file"])
    assert "torch.randn((10, 32))" in at_five.source
    assert "batch size 5 (the evaluator's other batch size for the model)" in at_five.source
    # the same Model as the part's own file: only the inputs drawn differ
    own = Path(softmax["file"]).read_text()
    assert own.split("def get_inputs")[0].split('"""')[-1] == \
        at_five.source.split("def get_inputs")[0].split('"""')[-1]


def test_a_model_that_rejects_another_batch_size_says_so_and_writes_no_part_again(tmp_path):
    found = decompose(model_file(tmp_path, FIXED_BATCH), "cpu", tmp_path / "decomposition")
    assert found["batch"]["build"] == 8 and found["batch"]["other"] == 5
    assert found["batch"]["error"].startswith("RuntimeError: shape '[16, 4, 8]' is invalid")
    assert all(p["other_batch"] == [] for p in found["parts"])


def run_model(tmp_path, shape_check: bool = True) -> dict:
    """`kforge model` over PAIRS with only the softmax part optimised, by a scripted model that
    answers `kernel`; every correct kernel is taken (--use correct), so nothing here depends on
    this machine's speed."""
    from kforge_nb.agents import AgentConfig
    from kforge_nb.evaluator import EvalOptions
    from kforge_nb.model.session import ModelSession
    from kforge_nb.session import Budget
    model = ModelSession(model_file(tmp_path), "cpp", AgentConfig(provider="anthropic"),
                         Budget(iterations=1),
                         EvalOptions(trials=2, baselines=("eager",), shape_check=shape_check),
                         use="correct", out=tmp_path)
    softmax = next(p["id"] for p in model.decompose()["parts"] if p["label"] == "softmax")
    model.chosen = [softmax]
    return model.run()


def softmax_row(summary: dict) -> dict:
    return next(p for p in summary["parts"] if p["label"] == "softmax")


@pytest.mark.slow
@pytest.mark.parametrize("shape_check", [True, False], ids=["shape-check", "no-shape-check"])
def test_a_kernel_that_holds_only_at_its_build_size_is_not_kept(api, tmp_path,  # noqa: F811
                                                                 shape_check):
    """With or without the evaluator's own batch trial (--no-shape-check), the part's session
    finds the kernel correct at its own sizes; the model keeps the part as written and says
    why in one line, and is judged end to end as written, with its interval."""
    api([answer(TAIL_OF_ONE)])
    summary = run_model(tmp_path, shape_check)
    assert summary["error"] is None
    row = softmax_row(summary)
    assert row["state"] == "correct"                 # its session's verdict, at 16 (and 9) rows
    assert not row["used"]
    why = ("correct only at the size it was built for (mismatch where the model at batch size "
           "5 hands it (10, 32))")
    assert row["why"] == why + ": kept as written"
    assert row["batch_check"]["state"] == "mismatch"
    assert "(trial 1 (seed" in row["batch_check"]["message"]     # the verdict's own words
    e2e = summary["end_to_end"]
    assert e2e["state"] == "correct", e2e["message"]
    assert e2e["as_written"] and e2e["kernels"] == [] and e2e["with_kernels"] is None
    assert e2e["why_as_written"] == (f"no part's kernel is kept (part {row['part']} {why}): the "
                                     "model as written, judged end to end")
    assert "softmax_rows" not in Path(e2e["path"]).read_text()
    low, high = e2e["speedup_vs_eager_ci"]
    assert low <= e2e["speedup_vs_eager"] <= high


@pytest.mark.slow
def test_a_kernel_that_holds_at_every_batch_size_is_kept(api, tmp_path):  # noqa: F811
    api([answer(GOOD)])
    summary = run_model(tmp_path)
    assert summary["error"] is None
    row = softmax_row(summary)
    assert row["state"] == "correct" and row["used"], row["why"]
    assert row["batch_check"]["state"] == "correct"
    assert row["batch_check"]["files"][0].endswith("part_01_batch5.py")
    e2e = summary["end_to_end"]
    assert e2e["state"] == "correct", e2e["message"]
    assert e2e["kernels"] == [row["part"]] and not e2e.get("as_written")
    low, high = e2e["speedup_vs_eager_ci"]
    assert low <= e2e["speedup_vs_eager"] <= high
    assert "kernels.softmax_rows" in Path(e2e["path"]).read_text()
