"""The view (labextension/src/view.ts) draws real run records, as the live widget and as
JupyterLab's renderer of a saved notebook, and sends what the widget's `handle_message` reads.

The records come from real sessions; the committed bundle (kforge_nb/ui/static/view.js, what a
notebook loads) runs in jsdom under node (labextension/test/render.mjs). Skipped, saying why,
where node or jsdom is missing (`cd labextension && npm ci` installs jsdom).
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.test_magic import (BROKEN, FASTER, FASTEST, GOOD, WRONG, answer, api, ip,  # noqa: F401
                              kforge, recommendation, wait_for)

LABEXTENSION = Path(__file__).parent.parent / "labextension"
pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (LABEXTENSION / "node_modules" / "jsdom").is_dir(),
    reason="needs node and jsdom: `cd labextension && npm ci`")


def render(tmp_path: Path, renderer: str, record: dict, steps: list[dict]) -> dict:
    """Snapshots (what the view shows, and what it sent) after the scenario's steps."""
    scenario = tmp_path / f"scenario-{renderer}.json"
    scenario.write_text(json.dumps({"renderer": renderer, "record": record, "steps": steps}))
    proc = subprocess.run(["node", "test/render.mjs", str(scenario)], cwd=LABEXTENSION,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def record_of(session) -> dict:
    from kforge_nb.ui.report import run_record
    return run_record(session)


def test_a_finished_run_shows_its_end_state_and_unique_candidates(api, kforge, tmp_path):
    api([answer(BROKEN), answer(GOOD), recommendation(), answer(FASTER)])
    record = record_of(kforge("--iterations 3"))
    seen = render(tmp_path, "widget", record, [
        {"snapshot": "end"},
        {"click": '[data-role=candidate][data-id="0.0"]'},
        {"click": "button[data-tab=errors]"},
        {"snapshot": "broken"},
        {"fill": "textarea[data-input=code]", "value": "my edit"},
        {"click": "button[data-action=evaluate]"},
        {"snapshot": "evaluated"}])
    end = seen["end"]
    assert end["renderer"] == "widget" and end["state"] == "finished" and end["roots"] == 1
    assert "finished: iteration budget used" in end["header"] and "3/3" not in end["header"]
    assert end["stop"] is None                                   # Stop only while running
    assert end["candidates"] == ["0.0", "1.0", "2.0"]            # unique, one chip each
    assert end["selected"] == record["best_id"]                  # the best, once finished
    assert end["tabs"] == ["code", "errors", "correctness", "profile", "performance",
                           "recommendation"] and end["shown"] == ["code"]
    recommendation_pane = end["panes"]["recommendation"]
    assert "session finished: iteration budget used" in recommendation_pane
    assert "waiting" not in recommendation_pane
    assert set(end["buttons"]) == {"evaluate"}                   # nothing left to decide
    assert not end["buttons"]["evaluate"]["disabled"]            # an edit can still be judged
    assert end["inputs"]["code"]["value"] == record["best"]["code"]
    assert {"speedup", "timeline"} <= set(end["charts"])            # Performance, Profile
    assert [row.split(" | ")[2] for row in end["rows"]] == ["compile_failure", "correct",
                                                          "correct"]
    assert end["scripts"] == 0 and end["images"] == 0 and end["handlers"] == 0

    broken = seen["broken"]
    assert broken["selected"] == "0.0" and broken["shown"] == ["errors"]
    # the failing line: the example's row sum, a loop on one line
    assert [line.strip().endswith("row_sum += row_out[c]") for line in broken["marked"]] == [True]
    assert "compile_failure" in broken["panes"]["errors"]
    assert seen["evaluated"]["sent"] == [{"action": "evaluate", "code": "my edit"}]


@pytest.mark.slow     # runs a session behind the view
def test_a_waiting_run_asks_then_shows_the_end_and_the_session_follows_its_messages(
        api, kforge, tmp_path):
    """What the view sends is what the widget's handle_message reads: the session follows."""
    from kforge_nb.magics import live_widget
    server = api([answer(GOOD), recommendation("chunk the rows"), answer(FASTER)])
    session = kforge("--iterations 2 --mode review")
    wait_for(session, "recommendation")
    waiting = record_of(session)
    seen = render(tmp_path, "widget", waiting, [
        {"snapshot": "waiting"},
        {"fill": "textarea[data-input=edit]", "value": "chunk rows by 4 and unroll by 2"},
        {"click": "button[data-action=edit]"},
        {"snapshot": "sent"}])
    w = seen["waiting"]
    assert w["state"] == "running" and "iteration 2/2" in w["header"]
    assert w["stop"] == {"disabled": False}
    assert w["tab"] == "recommendation"                          # the question is shown
    assert "waiting for your decision" in w["panes"]["recommendation"]
    assert "chunk the rows" in w["panes"]["recommendation"]
    assert {k: v["disabled"] for k, v in w["buttons"].items()} == {
        "stop": False, "evaluate": False, "accept": False, "edit": False, "redirect": False,
        "skip": False}
    assert w["inputs"]["edit"]["value"] == "use schedule(static, 4)"   # to be edited
    sent = seen["sent"]["sent"]
    assert sent == [{"action": "edit", "text": "chunk rows by 4 and unroll by 2"}]
    assert all(v["disabled"] for k, v in seen["sent"]["buttons"].items()
               if k in ("accept", "edit", "redirect", "skip"))    # until the kernel answers

    widget = live_widget(session)
    widget.handle_message(sent[0])
    session.wait(120)
    assert [a.decision.text if a.decision else None for a in session.history] == \
        [None, "chunk rows by 4 and unroll by 2"]
    assert "chunk rows by 4" in server.requests[2]["body"]["messages"][0]["content"]

    finished = render(tmp_path, "widget", waiting, [
        {"record": widget.record}, {"snapshot": "end"}])["end"]
    assert finished["state"] == "finished" and finished["stop"] is None
    assert "finished: iteration budget used" in finished["header"]
    assert "waiting" not in finished["panes"]["recommendation"]
    assert set(finished["buttons"]) == {"evaluate"}
    assert finished["candidates"] == ["0.0", "1.0"]


def test_a_saved_run_is_drawn_without_a_kernel(api, kforge, tmp_path):
    api([answer(WRONG), answer(GOOD)])
    record = record_of(kforge("--iterations 2"))
    saved = render(tmp_path, "mime", record, [
        {"click": '[data-role=candidate][data-id="0.0"]'},
        {"click": "button[data-tab=correctness]"},
        {"snapshot": "saved"}])["saved"]
    assert saved["renderer"] == "mime" and saved["state"] == "finished"
    assert any("run record — not live" in note for note in saved["notes"])
    assert saved["buttons"] == {"evaluate": {"disabled": True}}
    assert saved["inputs"]["code"]["readOnly"] and saved["sent"] == []
    assert "max abs error" in saved["panes"]["correctness"] and "error-map" in saved["charts"]
    assert "worst positions" in saved["panes"]["correctness"]


def test_text_from_the_record_is_never_parsed_as_html(api, kforge, tmp_path):
    api([answer(GOOD)])
    record = record_of(kforge("--iterations 1"))
    hostile = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
    record["history"][0]["code"] = record["best"]["code"] = hostile
    record["summary"]["problem"] = hostile
    record["notices"] = [hostile]
    seen = render(tmp_path, "widget", record, [{"snapshot": "end"}])["end"]
    assert seen["images"] == 0 and seen["scripts"] == 0 and seen["handlers"] == 0
    assert hostile in seen["header"] and hostile in seen["panes"]["code"]


@pytest.mark.slow     # runs a session behind the view
def test_the_edit_box_follows_each_recommendation_and_the_end_leaves_the_record(
        api, kforge, tmp_path):
    """Issue 30: the Edit box holds each new recommendation (not the last edit's words); the
    candidates table's "from" shows the person's words where they edited or redirected. When
    the run ends, the report in the widget's place is the record a saved notebook keeps (issue
    39: one channel per run): it says so, and its controls send nothing."""
    from kforge_nb.magics import live_widget
    api([answer(GOOD), recommendation("chunk the rows"), answer(FASTER),
         recommendation("chunk more", "use schedule(static, 8)"), answer(FASTEST)])
    session = kforge("--iterations 3 --mode review")
    widget = live_widget(session)
    wait_for(session, "recommendation")
    first = record_of(session)
    widget.handle_message({"action": "edit", "text": "chunk rows by 2 please"})
    wait_for(session, "recommendation", 2)
    second = record_of(session)
    widget.handle_message({"action": "redirect", "text": "take 8 rows at a time"})
    session.wait(120)
    final = record_of(session)
    seen = render(tmp_path, "widget", first, [
        {"fill": "textarea[data-input=edit]", "value": "chunk rows by 2 please"},
        {"fill": "textarea[data-input=redirect]", "value": "not sent"},
        {"click": "button[data-action=edit]"},
        {"record": second}, {"snapshot": "next"},
        {"record": final}, {"click": "button[data-tab=performance]"}, {"snapshot": "end"},
        {"report": final}, {"snapshot": "report"},
        {"fill": "textarea[data-input=code]", "value": "my edit"},
        {"click": "button[data-action=evaluate]"}, {"snapshot": "evaluated"}])
    following = seen["next"]["inputs"]
    assert following["edit"]["value"] == "use schedule(static, 8)"     # the new one, not mine
    assert following["redirect"]["value"] == ""
    rows = {row.split(" | ")[0].rstrip(" ★"): row.split(" | ")[7] for row in seen["end"]["rows"]}
    assert rows["1.0"] == "edit: chunk rows by 2 please"
    assert rows["2.0"] == "redirect: take 8 rows at a time"          # not "chunk more"
    report = seen["report"]
    assert report["renderer"] == "mime" and report["state"] == "finished" and report["roots"] == 1
    assert any("run record — not live" in note and "%kforge eval VAR" in note
               for note in report["notes"])
    assert report["buttons"] == {"evaluate": {"disabled": True}}
    assert report["inputs"]["code"]["readOnly"] is True
    assert seen["evaluated"]["sent"] == seen["end"]["sent"]         # the report sent nothing
