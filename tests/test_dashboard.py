"""The dashboard: its buttons hand decisions to the session, its tabs show the verdicts.

Buttons are clicked programmatically (`button.click()` runs the same handlers a browser click
does); the session's recorded decisions and the prompts the model received prove it followed.
"""
from __future__ import annotations

import time

from tests.test_magic import (BROKEN, FASTER, FASTEST, GOOD, WRONG, answer, api, ip,  # noqa: F401
                              kforge, magics, recommendation, wait_for)


def test_review_mode_waits_and_follows_accept_edit_redirect_then_stop(api, ip, kforge):
    server = api([answer(GOOD), recommendation("chunk the rows"), answer(FASTER),
                  recommendation("unroll"), answer(FASTEST), recommendation("vectorise"),
                  answer(GOOD), recommendation("never asked")])
    session = kforge("--iterations 6 --mode review")
    dash = magics(ip).dashboard
    assert session.running                                     # review mode: the cell returned

    wait_for(session, "recommendation", 1)
    time.sleep(0.3)
    assert len(session.history) == 1 and session.running      # waiting for a person
    assert dash.pending and not dash.buttons["accept"].disabled
    dash.buttons["accept"].click()

    wait_for(session, "recommendation", 2)
    dash.edit_text.value = "unroll the inner loop by 8, keep schedule(static)"
    dash.buttons["edit"].click()

    wait_for(session, "recommendation", 3)
    dash.redirect_text.value = "try a two-pass algorithm with a single exp per element"
    dash.buttons["redirect"].click()

    wait_for(session, "recommendation", 4)
    dash.buttons["stop"].click()
    session.wait(120)

    decisions = [e.data["kind"] for e in session.events if e.kind == "decision"]
    assert decisions == ["accept", "edit", "redirect", "stop"]
    assert [a.decision.kind if a.decision else None for a in session.history] == \
        [None, "accept", "edit", "redirect"]
    assert session.finish_reason == "stopped by the user"
    prompts = [r["body"]["messages"][0]["content"] for r in server.requests]
    assert "schedule(static, 4)" in prompts[2]                   # accepted recommendation
    assert "unroll the inner loop by 8" in prompts[4]            # the edited text
    assert "two-pass algorithm" in prompts[6]                    # the redirect
    assert dash.buttons["accept"].disabled and dash.finished


def test_edit_with_empty_text_is_refused_in_the_dashboard_not_the_session(api, ip, kforge):
    api([answer(GOOD), recommendation(), answer(FASTER)])
    session = kforge("--iterations 2 --mode review")
    dash = magics(ip).dashboard
    wait_for(session, "recommendation")
    dash.edit_text.value = "   "
    dash.buttons["edit"].click()
    assert "needs text" in dash.decision_status.value and session.running
    dash.buttons["skip"].click()
    session.wait(120)
    assert [e.data["kind"] for e in session.events if e.kind == "decision"] == ["skip"]


def test_auto_mode_accepts_by_itself_and_disables_the_decision_buttons(api, ip, kforge):
    api([answer(GOOD), recommendation(), answer(FASTER)])
    session = kforge("--iterations 2 --mode auto")
    dash = magics(ip).dashboard
    assert [e.data["kind"] for e in session.events if e.kind == "decision"] == ["accept"]
    assert all(b.disabled for b in dash.buttons.values())
    assert "accepted automatically" in dash.decision_status.value


def test_stop_button_in_the_header_stops_the_session(api, ip, kforge):
    api([answer(GOOD)] + [recommendation(), answer(FASTER)] * 6)
    session = kforge("--iterations 6 --no-block")
    wait_for(session, "evaluated")
    magics(ip).dashboard.stop_button.click()
    session.wait(120)
    assert session.finish_reason == "stopped by the user"


def test_evaluate_my_edit_judges_the_editor_text_in_the_background(api, ip, kforge):
    api([answer(GOOD)])
    session = kforge("--iterations 1")
    dash = magics(ip).dashboard
    assert dash.editor.value == GOOD                       # the editor holds the candidate
    dash.editor.value = WRONG
    dash.evaluate_button.click()
    wait_for(session, "evaluated", 2)
    deadline = time.monotonic() + 30
    while "mismatch" not in dash.edit_status.value and time.monotonic() < deadline:
        time.sleep(0.05)
    assert session.history[-1].code == WRONG and session.history[-1].kind == "manual"
    assert "mismatch" in dash.edit_status.value
    assert "max abs error" in dash.correctness_view.value
    assert "error heat map" in dash.error_map_view.value      # 2-D output: a heat map
    assert "worst positions" in dash.correctness_view.value
    assert len(dash.strip.children) == 2


def test_compile_error_marks_the_offending_line_and_diff_shows_the_fix(api, ip, kforge):
    api([answer(BROKEN), answer(GOOD)])
    kforge("--iterations 2")
    dash = magics(ip).dashboard
    dash.select(0)
    assert "compile_failure" in dash.errors_view.value
    assert "row_sum += row_out[c]" in dash.errors_view.value
    assert "background-color: #ffffcc" in dash.errors_view.value   # pygments' hl_lines mark
    dash.select(1)
    assert "+1 / -1 lines" in dash.diff_view.value
    assert "speedup per correct candidate" in dash.speedup_view.value
    assert "kernel timeline" in dash.timeline_view.value
    assert "top kernels" in dash.profile_view.value and "trace" in dash.profile_view.value


def test_interpreter_timings_are_flagged_prominently(api, ip, kforge):
    from pathlib import Path
    import kforge_nb
    triton = (Path(kforge_nb.__file__).parent / "targets/examples/triton_softmax.py").read_text()
    api([answer(triton)])
    session = kforge("--iterations 1 --target triton")
    dash = magics(ip).dashboard
    assert session.history[0].result.state == "correct"
    assert session.history[0].result.timing.real is False
    assert "NOT performance figures" in dash.banner.value and "interpreter" in dash.banner.value


def test_interactive_plotly_charts_are_built_on_request_and_follow_the_selection(api, ip, kforge):
    import pytest
    from kforge_nb.ui import figures
    if figures.available():
        pytest.skip(figures.available())
    api([answer(GOOD), recommendation(), answer(FASTER)])
    kforge("--iterations 2")
    dash = magics(ip).dashboard
    assert not dash.figures                                # nothing heavy until asked
    dash.interactive_button.click()
    timeline, speedups = dash.timeline_box.children[0], dash.speedup_box.children[0]
    assert type(timeline).__name__ == "FigureWidget"
    assert [t.name for t in timeline.data] == ["reference", "candidate"]
    assert len(speedups.data[0].y) == 2                   # vs eager, both candidates
    dash.select(0)
    assert dash.timeline_box.children[0] is timeline      # redrawn in place, one widget
    assert "candidate 0.0" in timeline.layout.title.text


def test_without_anywidget_the_interactive_button_says_what_to_install(api, ip, kforge,
                                                                       monkeypatch):
    import sys
    api([answer(GOOD)])
    kforge("--iterations 1")
    monkeypatch.setitem(sys.modules, "anywidget", None)   # as if it were not installed
    dash = magics(ip).dashboard
    dash.interactive_button.click()
    assert "pip install plotly anywidget" in dash.timeline_box.children[0].value
    assert not dash.figures


def test_one_dimensional_error_maps_are_drawn_as_bars():
    from kforge_nb.ui import charts
    svg = charts.error_map({"kind": "1d", "values": [0.0, 0.5, 2.0], "shape": [3000]})
    assert svg.count("<rect") == 3 and "tallest 2" in svg and "shape 3000" in svg


def test_builtin_agent_offline_in_review_mode_follows_the_buttons(ip, kforge, monkeypatch):
    """Whatever the builtin analyst concludes from this machine's timings (a change, or "no
    further change expected"), review mode asks, and a redirect always goes on: the outcome
    does not depend on the machine's speed."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    session = kforge("--iterations 3 --provider builtin --mode review")
    dash = magics(ip).dashboard
    wait_for(session, "recommendation", 1)
    dash.redirect_text.value = "keep the kernel as it is"
    dash.buttons["redirect"].click()
    wait_for(session, "recommendation", 2)
    dash.redirect_text.value = "use a single pass with an online softmax"
    dash.buttons["redirect"].click()
    session.wait(120)
    assert session.provider_description.startswith("builtin")
    assert [a.decision.kind if a.decision else None for a in session.history] == \
        [None, "redirect", "redirect"]
    assert session.history[0].result.state == "correct" and session.best is not None
