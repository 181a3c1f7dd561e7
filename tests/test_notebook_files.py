"""The workshop notebooks as files: saved after their runs finished, and as JupyterLab writes them.

nbval (pyproject's --nbval-lax) runs every notebook but never looks at what was saved; these
tests read the saved files. A notebook saved mid-run shows a stale view to everyone who opens
it ("running: iteration 4/4", a Stop button that does nothing), a stderr output is a red box,
and "0.00x" is a stalled timing, not a kernel's speed. A file that differs from what JupyterLab
would write is marked modified as soon as it is opened. `notebooks/run_and_save.py` executes a
notebook and saves it in that form.
"""
from __future__ import annotations

import ast
import importlib.util
import json
import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
MIME = "application/vnd.kforge.run+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
STALLED = re.compile(r"(?<![\d.])0\.00x")     # a ratio that rounds to zero: a stall, not a kernel
# a spread beside the evaluator's intervals: the paired ratios' IQR, or one computed in a cell
OWN_SPREAD = re.compile(r"\b(speedup_spread|candidate_spread|statistics\.|quantile|percentile)\b")


def saver():
    path = NOTEBOOKS[0].parent / "run_and_save.py"
    spec = importlib.util.spec_from_file_location("run_and_save", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def outputs(nb):
    """(cell index, output) for every output of every code cell."""
    return [(k, out) for k, cell in enumerate(nb.cells) if cell.cell_type == "code"
            for out in cell.outputs]


def shown_text(out) -> str:
    """What a reader sees of an output: stream text, or every text-like representation."""
    if out.output_type == "stream":
        return out.text
    data = out.get("data", {})
    return "\n".join(v if isinstance(v, str) else json.dumps(v)
                     for k, v in data.items() if k.startswith("text/") or k == MIME)


def test_the_workshop_has_its_notebooks():
    assert len(NOTEBOOKS) == 6, [p.name for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_saved_after_the_run_finished(path):
    nb = nbformat.read(path, as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code" and cell.source.strip()]
    # run top to bottom, every cell, in one kernel: no cell left unrun or run out of order
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1))
    problems = []
    # a run whose report says its timings are not performance figures (Triton's CPU
    # interpreter) may show any speedup, 0.00x too, in its cell and where its name is printed
    unreal = {m.group(1) for cell in nb.cells if cell.cell_type == "code"
              and "not a performance figure" in str(cell.get("outputs", ""))
              for m in re.finditer(r"--name (\w+)", cell.source)}
    for k, out in outputs(nb):
        if out.output_type == "error":
            problems.append(f"cell {k}: an error output ({out.ename})")
        if out.output_type == "stream" and out.name == "stderr":
            problems.append(f"cell {k}: a stderr output: {out.text[:120]!r}")
        data = out.get("data", {})
        if WIDGET_VIEW in data:
            problems.append(f"cell {k}: a live widget (its state is the moment it was saved)")
        record = data.get(MIME)
        if record is not None and (record["state"] != "finished" or record["running"]):
            problems.append(f"cell {k}: the run's report was saved mid-run: {record['status']!r}")
        text = shown_text(out)
        if "running: iteration" in text:
            problems.append(f"cell {k}: a view saved mid-run")
        cell_source = nb.cells[k].source
        if any(f"--name {name}" in cell_source or f"{name}." in cell_source for name in unreal):
            continue
        for stall in STALLED.finditer(text):
            context = text[max(0, stall.start() - 80):stall.end()]
            problems.append(f"cell {k}: a 0.00x figure: {context!r}")
    assert not nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_timings_are_written_as_the_views_write_them(path):
    """A cell that prints a spread of its own shows two figures for one timing (a cell said
    "spread 1%" under a view's ±25%): a notebook writes speedups, intervals and times with
    kforge_nb.intervals or Result.summary, as the views do."""
    nb = nbformat.read(path, as_version=4)
    own = [(k, m.group(0)) for k, cell in enumerate(nb.cells) if cell.cell_type == "code"
           for m in OWN_SPREAD.finditer(cell.source)]
    assert not own, f"cells computing a spread of their own: {own}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_assert_says_what_failed(path):
    """A bare AssertionError tells a workshop nothing: each assert in a cell carries a message
    (the run's reason, the verdict's summary), so a failing cell says what went wrong."""
    from IPython.core.inputtransformer2 import TransformerManager
    to_python = TransformerManager().transform_cell
    nb = nbformat.read(path, as_version=4)
    bare = [(k, ast.unparse(node)) for k, cell in enumerate(nb.cells)
            if cell.cell_type == "code" and not cell.source.lstrip().startswith("%%")
            for node in ast.walk(ast.parse(to_python(cell.source)))
            if isinstance(node, ast.Assert) and node.msg is None]
    assert not bare, f"asserts without a message: {bare}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_saved_as_jupyterlab_writes_it(path):
    text = path.read_text(encoding="utf-8")
    nb = nbformat.reads(text, as_version=4)
    nbformat.validate(nb)
    assert (nb.nbformat, nb.nbformat_minor) == (4, 5)
    assert all(cell.get("id") for cell in nb.cells)
    assert text == nbformat.writes(nb) + "\n", "not in nbformat's layout: save it with " \
        "notebooks/run_and_save.py (or nbformat.write)"
    # JupyterLab sets the kernelspec of the kernel it starts: another one marks the file modified
    assert nb.metadata.kernelspec == saver().kernelspec(), \
        f"kernelspec {dict(nb.metadata.kernelspec)}: JupyterLab would rewrite it"
