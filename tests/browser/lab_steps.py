"""Steps the browser tests share: a notebook written for JupyterLab to open, and a notebook
saved with Ctrl+S as a person saves it (the fixtures are in conftest.py)."""
from __future__ import annotations

import time
from pathlib import Path


def write_notebook(path: Path, sources: list[str]) -> None:
    """A notebook of these code cells, on the python3 kernel."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                 "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    nbformat.write(nb, str(path))


def save_notebook(page, cells, path: Path, timeout_ms: float) -> None:
    """Ctrl+S in command mode (a click on the first cell's prompt: there Ctrl+S is the
    notebook's, not the browser's), then wait until the tab is clean and the file changed."""
    mtime = path.stat().st_mtime_ns
    cells.nth(0).locator(".jp-InputPrompt").click()
    page.keyboard.press("Control+s")
    page.locator(".lm-TabBar-tab.jp-mod-current.jp-mod-dirty").wait_for(state="detached",
                                                                          timeout=timeout_ms)
    deadline = time.monotonic() + 60
    while path.stat().st_mtime_ns == mtime and time.monotonic() < deadline:
        page.wait_for_timeout(250)
    assert path.stat().st_mtime_ns != mtime, "Ctrl+S did not write the notebook"
