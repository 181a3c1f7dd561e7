"""Issue 39, item 4: one display channel per run, and the candidates tree worked out in one place.

- The tree's shape (roots, order, depth, greyed, lineage labels) is worked out by
  kforge_nb/ui/fallback.py (`tree_layout`) and carried in the record (`tree`); the view
  (labextension/src/tree.ts, in the committed bundle, in jsdom) draws those rows as they are,
  whatever the candidates' parents say, and tolerates rows a hand-edited record gets wrong.
- The report (JupyterLab's MIME renderer) is never connected to a kernel: it always reads
  "saved run — no kernel"; the widget is the run's one live view, before and after its end.
- The HTML fallback carries `.kforge-report`, the class by which the widget's style hides it
  beside the live widget, and that rule is in the styles both bundles ship.

Real records of real sessions (the scripted verdicts of tests/support/scripted_run.py, and a
run of the offline builtin agent); the jsdom tests skip, saying why, without node and jsdom.
"""
from __future__ import annotations

from pathlib import Path

from kforge_nb.ui import fallback
from kforge_nb.ui.report import run_record
from tests.support.scripted_run import scripted_session
from tests.test_notebook_labextension import pytestmark as needs_jsdom  # noqa: F401
from tests.test_notebook_labextension import render

ROOT = Path(__file__).resolve().parent.parent
pytestmark = needs_jsdom


def drawn_tree(seen: dict) -> list[tuple[str, str | None, str | None, bool]]:
    """(id, the node it is nested in, its lineage tag, greyed) per drawn node, in order."""
    return [(n["id"], n["parent"], n["tags"].get("lineage"), "greyed" in n["flags"])
            for n in seen["tree"]]


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


def test_a_record_saved_before_the_tree_lists_its_candidates_flat(tmp_path):
    record = run_record(scripted_session(tmp_path / "run"))
    del record["tree"]
    seen = render(tmp_path, "widget", record, [{"snapshot": "old"}])["old"]
    assert drawn_tree(seen) == [(a["id"], None, None, False) for a in record["history"]]


def test_the_report_is_never_live_and_the_widget_stays_live_after_the_end(tmp_path):
    record = run_record(scripted_session(tmp_path / "run"))
    assert record["state"] == "finished"
    report = render(tmp_path, "mime", record, [
        {"fill": "textarea[data-input=code]", "value": "my edit"},
        {"click": "button[data-action=evaluate]"}, {"snapshot": "report"}])["report"]
    assert report["renderer"] == "mime"
    assert any("saved run — no kernel" in note for note in report["notes"])
    assert report["buttons"] == {"evaluate": {"disabled": True}} and report["sent"] == []
    widget = render(tmp_path, "widget", record, [
        {"fill": "textarea[data-input=code]", "value": "my edit"},
        {"click": "button[data-action=evaluate]"}, {"snapshot": "widget"}])["widget"]
    assert not any("saved run" in note for note in widget["notes"])
    assert widget["sent"] == [{"action": "evaluate", "code": "my edit"}]


def test_the_report_stands_aside_beside_the_widget_by_style_alone(tmp_path):
    """No page-global registry, no DOM inspection in the bundles: the widget's style hides the
    report (the MIME view, or the HTML fallback) that follows it in the cell's outputs."""
    html = fallback.to_html(run_record(scripted_session(tmp_path / "run")))
    assert html.startswith('<div class="kforge-report"')
    rule = "~ .jp-OutputArea-child:has(.kforge-run[data-renderer=mime], .kforge-report)"
    widget_css = (ROOT / "kforge_nb/ui/static/view.css").read_text()
    lab_css = "".join(p.read_text() for p in (ROOT / "labextension/prebuilt/static").glob("*.js"))
    for css in (widget_css, lab_css):        # esbuild drops the quotes; webpack keeps the text
        assert rule in css.replace("'", "")
    bundles = [ROOT / "kforge_nb/ui/static/view.js",
               *(ROOT / "labextension/prebuilt/static").glob("*.js")]
    for path in bundles:
        text = path.read_text()
        assert "__kforge_live_runs" not in text and "MutationObserver" not in text, path
