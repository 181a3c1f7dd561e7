"""A whole model is judged end to end whatever its parts do (issue 36, item 6).

Where no part earns a kernel (here: none chosen), the recomposition that keeps every part as
written is judged by the real evaluator, and its verdict and interval are reported: `kforge
model` used to print "not judged" and exit 1, so a model whose parts all lost to eager had no
end-to-end figure at all.
"""
from __future__ import annotations

import pytest

from kforge_nb.problem import Problem
from kforge_nb.ui.model_view import end_to_end_line
from tests.test_model import MODEL

pytestmark = pytest.mark.slow


def test_a_model_whose_parts_earn_no_kernel_is_judged_as_written(tmp_path):
    from kforge_nb.agents import AgentConfig
    from kforge_nb.evaluator import EvalOptions
    from kforge_nb.model.session import ModelSession
    from kforge_nb.session import Budget
    model = ModelSession(Problem.from_file(MODEL), "cpp", AgentConfig(provider="builtin"),
                         Budget(iterations=1),
                         EvalOptions(trials=2, baselines=("eager",), shape_check=False),
                         parts=[], out=tmp_path)
    summary = model.run()
    assert summary["error"] is None
    e2e = summary["end_to_end"]
    assert e2e["state"] == "correct", e2e["message"]
    assert e2e["as_written"] and e2e["kernels"] == [] and e2e["with_kernels"] is None
    assert e2e["path"].endswith("model_as_written.py")
    assert e2e["speedup_vs_eager"] > 0 and e2e["timing_real"]
    ci = e2e["result"]["timing"]["speedup_vs_eager_ci"]
    assert ci[0] <= e2e["speedup_vs_eager"] <= ci[1]
    line = end_to_end_line(e2e)
    assert line.startswith("end to end, the model as written (no part has a kernel that is "
                           "correct and faster than its own eager code: the model as written, "
                           "judged end to end): correct, ")
    assert "not judged" not in line
