"""notebooks/quickstart.ipynb executed headless with nbclient, as CI, papermill or nbval would.

The `%%kforge` cell must block (nbclient sends allow_stdin=False, so no person is there), and
the saved notebook must hold the run as one output, the report bundle
(application/vnd.kforge.run+json with HTML and text fallbacks), and no widget: a widget output
in a saved notebook reads "Error displaying widget: model not found" once its kernel is gone,
and its text/plain fallback is what GitHub shows.
"""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.test_magic import GOOD, answer, api, recommendation  # noqa: F401

QUICKSTART = Path(__file__).parent.parent / "notebooks" / "quickstart.ipynb"
MIME = "application/vnd.kforge.run+json"
# softmax(2x) in C++: the example kernel with the scale folded into the exponent
GOOD_X2 = GOOD.replace("std::exp(row_in[c] - row_max)", "std::exp(2.0f * (row_in[c] - row_max))")
FASTER_X2 = GOOD_X2.replace("schedule(static)", "schedule(static, 4)")


def execute(path: Path, tmp_path: Path) -> nbformat.NotebookNode:
    """Run every cell in a fresh kernel (cwd = tmp_path), save, and read the saved file back."""
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", store_widget_state=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    saved = tmp_path / path.name
    nbformat.write(nb, saved)
    return nbformat.read(saved, as_version=4)


def kforge_cell(nb) -> nbformat.NotebookNode:
    return next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith("%%kforge"))


def assert_holds_the_run(nb, tmp_path: Path) -> dict:
    cell = kforge_cell(nb)
    shown = [o for o in cell.outputs if o.get("output_type") == "display_data"]
    assert len(shown) == 1 and MIME in shown[0]["data"], [o.get("data", {}).keys() for o in shown]
    data = shown[0]["data"]
    record = data[MIME]
    assert record["state"] == "finished" and record["summary"]["reason"]
    assert record["history"] and record["best"] and "class ModelNew" in record["best"]["code"]
    ids = [a["id"] for a in record["history"]]
    assert len(ids) == len(set(ids))
    kinds = [e["kind"] for e in record["events"]]
    assert "started" in kinds and kinds[-1] == "finished"
    html = data["text/html"]
    assert "<table" in html and "<script" not in html and "<svg" not in html
    assert "ModelNew" in html and "candidates over" in data["text/plain"]
    assert len(data["text/plain"].splitlines()) <= 5
    saved = nbformat.writes(nb)
    assert "widget-view+json" not in saved and "VBox(" not in saved
    assert not nb.metadata.get("widgets", {}).get(
        "application/vnd.jupyter.widget-state+json", {}).get("state")
    assert (tmp_path / "softmax_x2_kernel.py").exists()        # the export cell ran
    return record


def test_quickstart_executed_headless_holds_the_report_and_no_widget(api, tmp_path):
    api([answer(GOOD_X2), recommendation(), answer(FASTER_X2), recommendation(),
         answer(GOOD_X2)])
    nb = execute(QUICKSTART, tmp_path)
    record = assert_holds_the_run(nb, tmp_path)
    assert record["summary"]["provider"].startswith("anthropic")
    assert [a["result"]["state"] for a in record["history"]] == ["correct"] * 3


def builtin_agent_present() -> bool:
    try:
        from kforge_nb.agents.builtin import BuiltinAnalyst, BuiltinGenerator  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not builtin_agent_present(),
                    reason="the builtin offline agent is not in this checkout yet")
def test_quickstart_runs_offline_with_the_builtin_agent(monkeypatch, tmp_path):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    nb = execute(QUICKSTART, tmp_path)
    record = assert_holds_the_run(nb, tmp_path)
    assert record["summary"]["provider"].startswith("builtin")
    notices = [e["data"]["text"] for e in record["events"] if e["kind"] == "notice"]
    assert any("ANTHROPIC_API_KEY" in text for text in notices)   # why no model was used
