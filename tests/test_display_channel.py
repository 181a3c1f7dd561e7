"""Issue 39, item 4: one display channel per run, and the candidates tree laid out in one place.

A run's output in a cell is one display (kforge_nb/ui/report.py `RunDisplay`): at a frontend the
live widget while the session runs, replaced in place (its display id) by the final bundle when
it ends, so a saved notebook keeps the record and never a widget; headless, the bundle from the
start, updated in place. Nothing is displayed beside it, so the browser has nothing to reconcile:
the committed bundles hold no page-global registry of live runs and no DOM inspection.

The tree's shape (roots, order, depth, greyed, lineage labels) is worked out by
kforge_nb/ui/fallback.py (`tree_layout`) and carried in the record (`tree`); the view
(labextension/src/tree.ts, in the committed bundle, in jsdom) and the text and HTML fallbacks
draw those rows as they are, whatever the candidates' parents say.

Real sessions (the scripted verdicts of tests/support/scripted_run.py), the real widget and
IPython's own display machinery (its capturing publisher); the jsdom tests skip, saying why,
without node and jsdom.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from kforge_nb.session.finish import STOPPED, Finish
from kforge_nb.ui import fallback
from kforge_nb.ui.report import MIME, RunDisplay, run_record
from tests.support.scripted_run import Scripted, kernel, scripted_session
from tests.test_magic import ip  # noqa: F401
from tests.test_notebook_labextension import pytestmark as needs_jsdom
from tests.test_notebook_labextension import render

WIDGET = "application/vnd.jupyter.widget-view+json"
REPO = Path(__file__).resolve().parent.parent


def unfinished_session(folder):
    """A real session with two scripted verdicts, not finished yet."""
    from kforge_nb.session import Session
    from tests.test_session_anthropic import PROBLEM
    session = Session(PROBLEM, "cpp", out=folder, executor=Scripted())
    for tag in ("# A", "# B"):
        session.evaluate_code(kernel(tag))
    return session


def published(outputs) -> list[tuple[str, str, str | None]]:
    """(display or update, the display id, what it shows: widget / the record's state)."""
    return [("update" if o.update else "display", (o.transient or {}).get("display_id"),
             "widget" if WIDGET in o.data else o.data.get(MIME, {}).get("state"))
            for o in outputs]


def test_at_a_frontend_a_run_is_one_output_the_widget_then_its_record(ip, tmp_path):  # noqa: F811
    from IPython.utils.capture import capture_output

    from kforge_nb.ui.widget import RunWidget
    session = unfinished_session(tmp_path / "run")
    widget = RunWidget(session, interval=0)            # each event pushed as it comes
    with capture_output() as shown:
        RunDisplay(session, ip).show(widget)
        session.evaluate_code(kernel("# C"))           # the widget follows it: nothing shown
        assert widget.record["history"][-1]["id"] == session.history[-1].id
        assert published(shown.outputs) == [("display", published(shown.outputs)[0][1],
                                             "widget")]
        session._finish(Finish(STOPPED, "scripted"))
    (_, shown_id, _), *_ = published(shown.outputs)
    assert shown_id and published(shown.outputs) == [("display", shown_id, "widget"),
                                                      ("update", shown_id, "finished")]
    final = shown.outputs[-1].data
    assert WIDGET not in final and set(final) == {MIME, "text/html", "text/plain"}
    assert [a["id"] for a in final[MIME]["history"]] == [a.id for a in session.history]


def test_headless_a_run_is_its_record_updated_in_place(ip, tmp_path):  # noqa: F811
    from IPython.utils.capture import capture_output
    session = unfinished_session(tmp_path / "run")
    with capture_output() as shown:
        RunDisplay(session, ip).show(None, headless=True)
        session.evaluate_code(kernel("# C"))
        session._finish(Finish(STOPPED, "scripted"))
    (_, shown_id, _), *_ = published(shown.outputs)
    assert published(shown.outputs) == [("display", shown_id, "running"),
                                        ("update", shown_id, "running"),
                                        ("update", shown_id, "finished")]


def test_a_run_that_has_ended_shows_its_record_even_with_a_widget(ip, tmp_path):  # noqa: F811
    """`%kforge last` after the end, or an end between the widget's making and its display."""
    from IPython.utils.capture import capture_output

    from kforge_nb.ui.widget import RunWidget
    session = scripted_session(tmp_path / "run")
    with capture_output() as shown:
        RunDisplay(session, ip).show(RunWidget(session))
    assert [(kind, state) for kind, _, state in published(shown.outputs)] == \
        [("display", "finished")]


def test_the_bundles_hold_no_registry_of_live_runs_and_inspect_no_dom():
    """What the browser loads (the widget's bundle, the lab extension's chunks): no page-global
    map of runs and no watching or searching the notebook's DOM for another view of a run."""
    bundles = [REPO / "kforge_nb" / "ui" / "static" / "view.js",
               *(REPO / "labextension" / "prebuilt" / "static").glob("*.js")]
    ours = [b for b in bundles if "kforge-run" in b.read_text()]
    assert len(ours) >= 2, ours                        # the widget's and the renderer's
    for bundle in ours:
        text = bundle.read_text()
        for banned in ("__kforge_live", "MutationObserver", ".jp-OutputArea", "Loading widget"):
            assert banned not in text, f"{bundle.name} holds {banned!r}"


def drawn_tree(seen: dict) -> list[tuple[str, str | None, str | None, bool]]:
    """(id, the node it is nested in, its lineage tag, greyed) per drawn node, in order."""
    return [(n["id"], n["parent"], n["tags"].get("lineage"), "greyed" in n["flags"])
            for n in seen["tree"]]


@needs_jsdom
def test_the_view_draws_the_rows_the_record_lays_out(tmp_path):
    record = run_record(scripted_session(tmp_path / "run"))
    ids = [a["id"] for a in record["history"]]
    assert [row["id"] for row in record["tree"]] == \
        [a["id"] for _, a, _ in fallback.tree_rows(record)]            # one home: tree_rows
    # a shape no parent says: the view draws the record's rows, it works out none itself
    record["tree"] = [{"id": ids[0], "depth": 0, "greyed": False, "lineage": "Q"},
                      {"id": ids[2], "depth": 1, "greyed": True, "lineage": "Q"},
                      {"id": ids[1], "depth": 2, "greyed": True, "lineage": None},
                      {"id": "9.9", "depth": 1, "greyed": False},      # no such candidate
                      {"id": ids[0], "depth": 3, "greyed": False},     # drawn already
                      {"id": ids[3], "depth": 5, "greyed": False},     # a jump: its child
                      {"id": ids[4], "depth": 0, "greyed": False}]
    seen = render(tmp_path, "mime", record, [{"snapshot": "drawn"}])["drawn"]
    assert drawn_tree(seen) == [(ids[0], None, "Q", False), (ids[2], ids[0], "Q", True),
                                (ids[1], ids[2], None, True), (ids[3], ids[1], None, False),
                                (ids[4], None, None, False)]


@needs_jsdom
def test_a_record_saved_before_the_tree_lists_its_candidates_flat(tmp_path):
    record = run_record(scripted_session(tmp_path / "run"))
    del record["tree"]
    seen = render(tmp_path, "widget", record, [{"snapshot": "old"}])["old"]
    assert drawn_tree(seen) == [(a["id"], None, None, False) for a in record["history"]]


def test_the_fallbacks_draw_the_rows_the_record_lays_out(tmp_path):
    """The text and the script-free HTML draw the record's tree rows, as the view does."""
    record = run_record(scripted_session(tmp_path / "run"))
    ids = [a["id"] for a in record["history"]]
    record["tree"] = [{"id": ids[2], "depth": 0, "greyed": False, "lineage": "Q"},
                      {"id": ids[0], "depth": 1, "greyed": True, "lineage": None},
                      {"id": "9.9", "depth": 1, "greyed": False},      # no such candidate
                      {"id": ids[1], "depth": 0, "greyed": False}]
    text = fallback.to_text(record).splitlines()
    tree = text[next(k for k, line in enumerate(text) if line.startswith("candidates tree")) + 1:]
    assert [line.split()[0] for line in tree] == [ids[2], ids[0], ids[1]]
    assert tree[0].startswith(ids[2]) and "[Q]" in tree[0]
    assert tree[1].startswith(f"  {ids[0]} ") and "(under a pruned candidate)" in tree[1]
    html = fallback.to_html(record)
    assert [html.count(f'<div style="padding-left:{px}px') for px in (0, 16)] == [2, 1]
    assert html.index(f"{ids[2]} <span") < html.index(f"{ids[0]} <span") < \
        html.index(f"{ids[1]} <span")
