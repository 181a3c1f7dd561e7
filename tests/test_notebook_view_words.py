"""What the view says where a new user meets it (issue 38), on records of real sessions drawn by
the committed bundle in jsdom (labextension/test/render.mjs): the Correctness tab's trials,
criterion and missing error map, the Profile tab's one profiled call beside the timed median,
one numbering of iterations, an evaluated edit shown in the Errors tab, and the report (the
record a cell keeps once its run has ended) with its controls off, saying what to use instead."""
from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

import pytest

from tests.support.fake_anthropic import FakeAnthropic
from tests.test_magic import ip  # noqa: F401
from tests.test_magic import (BROKEN, FAST, FASTER, GOOD, SOFTMAX_CELL, WRONG, answer, magics,
                              recommendation)
from tests.test_notebook_labextension import pytestmark, record_of, render  # noqa: F401


def to_precision(value: float, digits: int) -> str:
    """JavaScript's Number(value.toPrecision(digits)): a tie rounds up (522.25 -> 522.3), where
    Python's format rounds it to even (522.2)."""
    exact = Decimal(value)
    quantum = Decimal(1).scaleb(exact.adjusted() - digits + 1)
    return format(exact.quantize(quantum, rounding=ROUND_HALF_UP).normalize(), "f")


@dataclass
class Finished:
    session: object       # the live session (an edit can still be judged on it)
    record: dict          # its record as the run ended, before any test judged an edit


@pytest.fixture(scope="module")
def finished(ip, tmp_path_factory):     # noqa: F811
    """One run for the whole file (each test draws its record; one session, not five): 3
    iterations under --trials 2: 0.0 does not compile, 1.0 is correct, then one recommendation
    accepted gives 2.0."""
    script = [answer(BROKEN), answer(GOOD), recommendation(), answer(FASTER)]
    with pytest.MonkeyPatch.context() as env, FakeAnthropic(script) as server:
        env.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-real-key")
        env.setenv("ANTHROPIC_BASE_URL", server.url)
        out = tmp_path_factory.mktemp("view-words") / "runs"
        ip.run_cell_magic("kforge", f"{FAST} --out {out} --iterations 3", SOFTMAX_CELL)
        session = ip.user_ns["_kforge"]
        # a copy, as a saved run's record is: the edit judged below changes the session's
        yield Finished(session, json.loads(json.dumps(record_of(session))))
        session.stop()
        session.wait(60)
        magics(ip).sessions.clear()


def test_the_correctness_tab_says_which_trials_ran_the_criterion_and_why_no_map(finished,
                                                                                tmp_path):
    seen = render(tmp_path, "widget", finished.record, [
        {"click": '[data-role=candidate][data-id="1.0"]'},
        {"click": "button[data-tab=correctness]"}, {"snapshot": "correct"},
        {"click": '[data-role=candidate][data-id="0.0"]'}, {"snapshot": "broken"}])
    pane = seen["correct"]["panes"]["correctness"]
    assert "3 of 3: the 2 asked for (--trials 2) and 1 at another batch size" in pane
    assert "shape / dtype (the last trial: at another batch size)" in pane
    assert "every element: |candidate − reference| <= atol + rtol·|reference|" in pane
    assert "of the smallest allowance" in pane and "within the criterion" in pane
    assert "shown, not the criterion" in pane                    # max rel error, explained
    assert "no error map: every trial matched" in pane
    assert "the record keeps maps" not in pane and "or the" not in pane   # one reason, not three
    assert "did not reach the correctness check" in seen["broken"]["panes"]["correctness"]


def test_the_profile_tab_labels_its_one_profiled_call_beside_the_timed_median(finished,
                                                                             tmp_path):
    record = finished.record
    profile = next(a for a in record["history"] if a["id"] == "1.0")["result"]["profile"]
    assert profile["profiled_calls"] >= 1 and profile["kernel_us"]["candidate"] > 0
    seen = render(tmp_path, "widget", record, [
        {"click": '[data-role=candidate][data-id="1.0"]'},
        {"click": "button[data-tab=profile]"}, {"snapshot": "profile"}])
    pane = seen["profile"]["panes"]["profile"]
    calls = profile["profiled_calls"]
    assert f"one profiled call of candidate 1.0 (the median of {calls} profiled calls), not the " \
           "timed median" in pane
    kernels = to_precision(profile["kernel_us"]["candidate"], 4)
    assert f"candidate: kernels {kernels} µs in this call; timed median" in pane
    assert "this call's kernels" in pane and "reference (eager): kernels" in pane


def test_iterations_are_numbered_as_the_header_numbers_them(finished, tmp_path):
    seen = render(tmp_path, "widget", finished.record, [
        {"click": "button[data-tab=recommendation]"}, {"snapshot": "end"}])
    pane = seen["end"]["panes"]["recommendation"]
    # the recommendation made after round 1 (candidate 1.0) is applied by iteration 3 of 3
    assert "(for iteration 3/3, whose candidates are 2.*; about candidate 1.0)" in pane
    assert "iteration 3: accept" in pane
    assert "--iterations 3: the first iteration writes the first candidate" in pane
    assert "so at most 2 decisions" in pane


def test_an_evaluated_edit_is_shown_in_the_errors_tab_once_judged(finished, tmp_path):
    before = finished.record
    finished.session.evaluate_code(WRONG)
    after = record_of(finished.session)
    edit = after["history"][-1]["id"]
    seen = render(tmp_path, "widget", before, [
        {"click": "button[data-tab=errors]"}, {"snapshot": "best"},
        {"fill": "textarea[data-input=code]", "value": WRONG},
        {"click": "button[data-action=evaluate]"},
        {"record": after}, {"message": f"your edit is candidate {edit}, shown in the tabs"},
        {"snapshot": "judged"}])
    assert seen["best"]["panes"]["errors"].endswith("no errors")
    judged = seen["judged"]
    assert judged["selected"] == edit and judged["shown"] == ["errors"]
    assert "mismatch" in judged["panes"]["errors"] and "no errors" not in judged["panes"]["errors"]
    assert judged["status"].count("mismatch") == 1       # the verdict said once


def test_the_report_is_the_record_with_its_controls_off(finished, tmp_path):
    """The report (the run's output once it has ended, and what a saved notebook keeps) has no
    kernel behind it, in this page or another: it says so once and what to use instead."""
    saved = render(tmp_path, "mime", finished.record, [
        {"fill": "textarea[data-input=code]", "value": WRONG},
        {"click": "button[data-action=evaluate]"}, {"snapshot": "saved"}])["saved"]
    said = [n for n in saved["notes"] if "run record — not live" in n]
    assert len(said) == 1 and "`%kforge eval VAR` judges an edit" in said[0]
    assert saved["buttons"]["evaluate"]["disabled"] and saved["inputs"]["code"]["readOnly"]
    assert saved["sent"] == []
