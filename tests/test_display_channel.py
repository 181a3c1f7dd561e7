"""Issue 39, item 4, in part: the candidates tree's shape worked out in one place.

The tree's shape (roots, order, depth, greyed, lineage labels) is worked out by
kforge_nb/ui/fallback.py (`tree_layout`, over `tree_rows`, which the HTML and text fallbacks draw
from) and carried in the record (`tree`); the view (labextension/src/tree.ts, in the committed
bundle, in jsdom) draws those rows as they are, whatever the candidates' parents say, and
tolerates rows a hand-edited record gets wrong. (The display channel itself, one view per run
without the page-global model registry of live.ts, is not done: see issue 39.)

Real records of a real session (the scripted verdicts of tests/support/scripted_run.py); the
tests skip, saying why, without node and jsdom.
"""
from __future__ import annotations

from kforge_nb.ui import fallback
from kforge_nb.ui.report import run_record
from tests.support.scripted_run import scripted_session
from tests.test_notebook_labextension import pytestmark as needs_jsdom  # noqa: F401
from tests.test_notebook_labextension import render

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
