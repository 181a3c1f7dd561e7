"""The live view: the widget hands what the browser sends to the session, and its record (what
the view draws) says what happened, the end included.

Messages go through `RunWidget.handle_message`, the widget's `on_msg` handler, with exactly the
content the view's `model.send` sends (labextension/src/view.ts; tests/test_notebook_labextension.py
checks the view sends these). The session's recorded decisions and the prompts the scripted model
received prove it followed.
"""
from __future__ import annotations

import json
import re
import sys

import pytest

from tests.test_magic import (BROKEN, FASTER, FASTEST, GOOD, WRONG, answer, api, ip,  # noqa: F401
                              kforge, recommendation, wait_for)

pytestmark = pytest.mark.slow     # each test runs a %%kforge session in a real IPython shell


def widget_of(session):
    """The live view, made as %%kforge makes it at a frontend."""
    from kforge_nb.magics import live_widget
    return live_widget(session)


def decisions(session) -> list[str]:
    return [e.data["kind"] for e in session.events if e.kind == "decision"]


def test_review_mode_follows_accept_edit_redirect_then_stop_sent_by_the_view(api, kforge):
    server = api([answer(GOOD), recommendation("chunk the rows"), answer(FASTER),
                  recommendation("unroll"), answer(FASTEST), recommendation("vectorise"),
                  answer(GOOD), recommendation("never asked")])
    session = kforge("--iterations 6 --mode review")
    widget = widget_of(session)
    assert session.running                                     # review mode: the cell returned

    wait_for(session, "recommendation", 1)
    widget.push()
    assert widget.record["pending"] and widget.record["state"] == "running"
    assert widget.record["recommendation"]["title"] == "chunk the rows"
    widget.handle_message({"action": "accept"})

    wait_for(session, "recommendation", 2)
    widget.handle_message({"action": "edit",
                           "text": "unroll the inner loop by 8, keep schedule(static)"})
    wait_for(session, "recommendation", 3)
    widget.handle_message({"action": "redirect",
                           "text": "try a two-pass algorithm with a single exp per element"})
    wait_for(session, "recommendation", 4)
    widget.handle_message({"action": "stop"})
    session.wait(120)

    assert decisions(session) == ["accept", "edit", "redirect", "stop"]
    assert [a.decision.kind if a.decision else None for a in session.history] == \
        [None, "accept", "edit", "redirect"]
    assert session.finish_reason == "stopped by the user"
    prompts = [r["body"]["messages"][0]["content"] for r in server.requests]
    assert "schedule(static, 4)" in prompts[2]                   # accepted recommendation
    assert "unroll the inner loop by 8" in prompts[4]            # the edited text
    assert "two-pass algorithm" in prompts[6]                    # the redirect
    record = widget.record                                       # pushed by `finished` at once
    assert record["state"] == "finished" and not record["pending"]
    assert [d["kind"] for d in record["decisions"]] == ["accept", "edit", "redirect", "stop"]
    assert record["status"].startswith("finished: stopped by the user")


def test_edit_with_empty_text_is_refused_and_the_reply_is_shown(api, kforge):
    api([answer(GOOD), recommendation(), answer(FASTER)])
    session = kforge("--iterations 2 --mode review")
    widget = widget_of(session)
    wait_for(session, "recommendation")
    widget.handle_message({"action": "edit", "text": "   "})
    assert "needs text" in widget.message and session.running
    widget.handle_message({"action": "skip"})
    session.wait(120)
    assert decisions(session) == ["skip"]


def test_after_the_end_the_record_is_finished_and_decisions_are_refused(api, kforge):
    api([answer(GOOD), recommendation(), answer(FASTER)])
    session = kforge("--iterations 2 --mode auto")              # blocks until the end
    widget = widget_of(session)
    record = widget.record
    assert record["state"] == "finished" and record["running"] is False
    assert not record["pending"] and record["recommendation"]["decision"] == "accept"
    assert record["summary"]["reason"] == "iteration budget used"
    assert record["status"].startswith("finished: iteration budget used; best is candidate")
    assert record["progress"] == {"iteration": 2, "iterations": 2}
    widget.handle_message({"action": "accept"})
    assert "already finished" in widget.message
    assert decisions(session) == ["accept"]                    # auto mode's own, nothing more


def test_stop_sent_by_the_view_stops_a_running_session(api, kforge):
    api([answer(GOOD)] + [recommendation(), answer(FASTER)] * 6)
    session = kforge("--iterations 6 --no-block")
    widget = widget_of(session)
    wait_for(session, "evaluated")
    widget.handle_message({"action": "stop"})
    session.wait(120)
    assert session.finish_reason == "stopped by the user"
    assert widget.record["state"] == "finished"


def test_evaluate_my_edit_takes_an_id_the_agent_never_uses(api, kforge):
    """The agent waits in iteration 1 for a decision; the edit judged meanwhile joins iteration 1
    as sample 1, and the agent's candidate of iteration 1 is 1.0: ids and folders differ."""
    api([answer(GOOD), recommendation(), answer(FASTER)])
    session = kforge("--iterations 2 --mode review")
    widget = widget_of(session)
    wait_for(session, "recommendation")
    widget.handle_message({"action": "evaluate", "code": WRONG}).join(120)
    # the verdict is said once, by the status line; the reply says which candidate it is
    assert widget.message == "your edit is candidate 1.1, shown in the tabs"
    assert widget.record["status"].startswith("candidate 1.1: mismatch (")
    widget.handle_message({"action": "accept"})
    session.wait(120)
    assert [(a.id, a.kind) for a in session.history] == \
        [("0.0", "initial"), ("1.1", "manual"), ("1.0", "optimise")]
    folders = {a.result.artifacts for a in session.history}
    assert len(folders) == 3                                    # nothing judged twice in one folder
    record = widget.record
    ids = [a["id"] for a in record["history"]]
    assert ids == ["0.0", "1.1", "1.0"] and len(set(ids)) == len(ids)
    manual = record["history"][1]
    assert manual["result"]["correctness"]["max_abs_error"] > 0
    assert manual["error_map"]["kind"] == "2d" and manual["result"]["correctness"]["worst"]


def test_an_edit_after_the_end_joins_the_last_iteration(api, kforge):
    api([answer(GOOD)])
    session = kforge("--iterations 1")
    widget = widget_of(session)
    widget.handle_message({"action": "evaluate", "code": "   "})
    assert "editor is empty" in widget.message
    widget.handle_message({"action": "evaluate", "code": FASTER}).join(120)
    widget.handle_message({"action": "evaluate", "code": FASTEST}).join(120)
    assert [a.id for a in session.history] == ["0.0", "0.1", "0.2"]
    assert [a["id"] for a in widget.record["history"]] == ["0.0", "0.1", "0.2"]


def test_record_of_a_compile_error_and_its_fix(api, kforge):
    api([answer(BROKEN), answer(GOOD)])
    session = kforge("--iterations 2")
    broken, fixed = widget_of(session).record["history"]
    error = broken["result"]["error"]
    assert broken["result"]["state"] == "compile_failure"
    assert BROKEN.splitlines()[error["line"] - 1].strip().endswith("row_sum += row_out[c]")
    assert fixed["kernels"]["candidate"] and fixed["kernels"]["reference"]   # Profile tab
    assert fixed["result"]["profile"]["trace"].endswith("trace.json")
    record = widget_of(session).record
    assert record["best_id"] == "1.0" and record["profile"]["candidate_events"]   # timeline


def test_interpreter_timings_are_flagged_in_the_record(api, kforge):
    from pathlib import Path
    import kforge_nb
    triton = (Path(kforge_nb.__file__).parent / "targets/examples/triton_softmax.py").read_text()
    api([answer(triton)])
    session = kforge("--iterations 1 --target triton")
    assert session.history[0].result.state == "correct"
    assert session.history[0].result.timing.real is False
    assert "interpreter" in widget_of(session).record["timing_note"]


def test_the_record_is_data_that_a_browser_can_parse(api, kforge):
    api([answer(WRONG), answer(GOOD)])
    session = kforge("--iterations 2")
    record = widget_of(session).record
    text = json.dumps(record, allow_nan=False)                 # JSON.parse refuses NaN
    assert "<div" not in text and "<span" not in text          # data, not HTML
    assert record["history"][0]["error_map"]["values"]


def test_fallback_html_survives_sanitising_and_draws_the_chart_as_a_png(api, kforge):
    from kforge_nb.ui.report import MIME, bundle, run_record
    api([answer(GOOD), recommendation(), answer(FASTER)])
    session = kforge("--iterations 2")
    shown = bundle(run_record(session))
    html = shown["text/html"]
    assert "<svg" not in html
    assert not re.search(r"<[^>]*\son\w+\s*=", html)            # no event handlers
    assert '<img alt="speedup per correct candidate" src="data:image/png;base64,' in html
    # one script, after the PNG: where scripts run, plotly draws the chart in its place (a
    # sanitiser drops it and the PNG stays)
    scripts = re.findall(r"<script>(.*?)</script>", html, re.S)
    assert len(scripts) == 1 and "Plotly.newPlot" in scripts[0]
    assert html.index("<img alt=\"speedup per correct candidate\"") < html.index("<script>")
    assert "<table" in html and "class ModelNew" in html
    text = shown["text/plain"].splitlines()
    assert len(text) <= 5 and "2 candidates over 2 iterations" in text[1]
    assert "finished: iteration budget used" in text[0]
    assert shown[MIME]["state"] == "finished"


def test_without_matplotlib_the_fallback_keeps_the_table(api, kforge, monkeypatch):
    from kforge_nb.ui import fallback
    from kforge_nb.ui.report import run_record
    api([answer(GOOD)])
    session = kforge("--iterations 1")
    fallback.speedup_png.cache_clear()
    monkeypatch.setitem(sys.modules, "matplotlib", None)         # as if it were not installed
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    try:
        html = fallback.to_html(run_record(session))
    finally:
        fallback.speedup_png.cache_clear()
    assert "<img" not in html and "<table" in html and "0.0 ★" in html


def test_without_anywidget_there_is_no_live_view_and_the_report_still_is(api, kforge, capsys,
                                                                          monkeypatch):
    from kforge_nb.ui.report import MIME
    api([answer(GOOD)])
    session = kforge("--iterations 1")
    monkeypatch.setitem(sys.modules, "anywidget", None)         # as if it were not installed
    monkeypatch.delitem(sys.modules, "kforge_nb.ui.widget", raising=False)
    assert widget_of(session) is None
    assert "pip install 'kforge-nb[notebook]'" in capsys.readouterr().err
    from kforge_nb.ui.report import bundle, run_record
    assert set(bundle(run_record(session))) == {MIME, "text/html", "text/plain"}


def test_history_and_best_print_one_short_line_per_attempt(api, kforge):
    api([answer(BROKEN), answer(GOOD), recommendation(), answer(FASTER)])
    session = kforge("--iterations 3")
    lines = repr(session.history).splitlines()
    assert lines[0] == "<History: 3 candidates>" and len(lines) == 4
    # short: id, kind, verdict, then as the view's chip says it (own time on a busy CPU, the
    # head-to-head's few words, the speedup vs eager with its interval)
    assert all(len(line) <= 130 for line in lines), lines
    assert lines[1].split()[:3] == ["0.0", "initial", "compile_failure"]
    assert lines[2].split()[:3] == ["1.0", "fix", "correct"] and " ms " in lines[2]
    best = repr(session.best)
    assert "\n" not in best and len(best) < 120
    # the speedup with its 95 % interval where the evaluator gave one: "0.11x ±3% vs eager",
    # on a busy CPU written out as the view writes it, "0.19x (0.177-0.214x) vs eager"
    assert re.search(r"\d\.\d\dx( ±[\d.]+%| \([\d.]+-[\d.]+x\))?( \(noisy\))? vs eager",
                     best), best
    assert "ModelNew" not in repr(session.history) + best
    html = session.history._repr_html_()
    assert html.count("<tr>") == 4 and "ModelNew" not in html
    assert session.best._repr_html_().count("<tr>") == 2


def test_builtin_agent_offline_in_review_mode_follows_the_view(ip, kforge, monkeypatch):
    """Whatever the builtin analyst concludes from this machine's timings (a change, or "no
    further change expected"), review mode asks, and a redirect always goes on: the outcome
    does not depend on the machine's speed."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    session = kforge("--iterations 3 --provider builtin --mode review")
    widget = widget_of(session)
    wait_for(session, "recommendation", 1)
    widget.handle_message({"action": "redirect", "text": "keep the kernel as it is"})
    wait_for(session, "recommendation", 2)
    widget.handle_message({"action": "redirect",
                           "text": "use a single pass with an online softmax"})
    session.wait(120)
    assert session.provider_description.startswith("builtin")
    assert [a.decision.kind if a.decision else None for a in session.history] == \
        [None, "redirect", "redirect"]
    assert session.history[0].result.state == "correct" and session.best is not None
