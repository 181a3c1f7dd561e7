"""notebooks/01_quickstart.ipynb executed headless with nbclient, as CI, papermill or nbval would.

The `%%kforge` cell must block (nbclient sends allow_stdin=False, so no person is there), and
the saved notebook must hold the run as one output, the report bundle
(application/vnd.kforge.run+json with HTML and text fallbacks), and no widget: a widget output
in a saved notebook reads "Error displaying widget: model not found" once its kernel is gone,
and its text/plain fallback is what GitHub shows.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.test_magic import api  # noqa: F401

pytestmark = pytest.mark.slow     # executes notebooks/01_quickstart.ipynb in a real kernel

QUICKSTART = Path(__file__).parent.parent / "notebooks" / "01_quickstart.ipynb"
MIME = "application/vnd.kforge.run+json"


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
    assert "<table" in html and "<svg" not in html
    # no script but the one that lets plotly draw the PNG's chart where a viewer runs scripts
    assert all("Plotly.newPlot" in script for script in re.findall(r"<script>(.*?)</script>",
                                                                    html, re.S))
    assert "ModelNew" in html and "candidates over" in data["text/plain"]
    # a few lines, then the candidates tree (a line per candidate) if the climb branched
    text = data["text/plain"].splitlines()
    head = next((k for k, line in enumerate(text) if line.startswith("candidates tree")), None)
    assert len(text[:head]) <= 5
    assert head is None or len(text) - head - 1 == len(record["history"])
    saved = nbformat.writes(nb)
    assert "widget-view+json" not in saved and "VBox(" not in saved
    assert not nb.metadata.get("widgets", {}).get(
        "application/vnd.jupyter.widget-state+json", {}).get("state")
    assert list(tmp_path.glob("kforge-runs/*/tanh_kernel.py"))   # the export cell ran
    return record


def test_quickstart_pins_the_builtin_agent_even_with_a_key(api, tmp_path):
    """The cell says `--provider builtin`: with ANTHROPIC_API_KEY set (the `api` fixture fakes
    the API), the saved run is still the builtin agent's, and no model was called."""
    server = api([])
    nb = execute(QUICKSTART, tmp_path)
    record = assert_holds_the_run(nb, tmp_path)
    assert record["summary"]["provider"].startswith("builtin")
    assert not server.requests


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
    assert record["history"] and all(a["result"]["state"] == "correct" for a in record["history"])
    # the cells after %%kforge ran: the standalone export matched torch in a fresh process
    outputs = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                      for o in c.outputs if o.get("output_type") == "stream")
    assert "'allclose': True" in outputs and "speedup vs eager" in outputs
    assert not any(o.get("output_type") == "error" for c in nb.cells for o in c.get("outputs", []))
