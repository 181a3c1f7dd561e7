"""The dashboard's candidates tree: the run record says where each candidate came from and how
the person steered the search, the view draws it as a tree (live with Pin / Prune buttons, saved
without), and what the buttons send reaches the session through the widget.

Real parts only: real sessions (the builtin provider, the cpp target, relu), the real widget's
`handle_message`, and the committed bundle (kforge_nb/ui/static/view.js) in jsdom
(labextension/test/render.mjs; those tests skip, saying why, without node and jsdom). Nothing
waits a fixed time: tests wait on the session's events.
"""
from __future__ import annotations

import json
import re
import shutil
import threading

import pytest

from kforge_nb.agents import AgentConfig
from kforge_nb.evaluator import EvalOptions
from kforge_nb.problem import Problem
from kforge_nb.session import Budget, Session
from kforge_nb.session.decisions import ACCEPT, REDIRECT, Decision
from kforge_nb.ui import fallback
from kforge_nb.ui.report import bundle, run_record
from tests.support.evaluator import candidate_source, problem_path
from tests.test_notebook_labextension import LABEXTENSION, render

needs_jsdom = pytest.mark.skipif(
    shutil.which("node") is None or not (LABEXTENSION / "node_modules" / "jsdom").is_dir(),
    reason="needs node and jsdom: `cd labextension && npm ci`")


GO_ON = "keep the kernel as it is"


class GoOn:
    """Accepts each recommendation, and answers the builtin analyst's "nothing more" (which
    depends on this machine's timings) with a redirect, so every branch goes on: the tree's
    shape does not depend on the machine's speed."""

    def decide(self, recommendation) -> Decision:
        done = recommendation.action.get("kind") == "done"
        return Decision(REDIRECT, GO_ON) if done else Decision(ACCEPT)


def make_session(folder, search="beam", iterations=3, mode="review", policy=None) -> Session:
    """A small real search: relu on the cpp target with the builtin (offline) agent; each
    candidate compiles and runs in about a second here. Review mode: a person (or `policy`)
    answers every recommendation."""
    return Session(Problem.from_file(problem_path("relu")), "cpp", AgentConfig(provider="builtin"),
                   Budget(iterations=iterations, samples=1, patience=None, confirm=0),
                   EvalOptions(trials=1, baselines=("eager",), timing_budget_s=0.1),
                   mode=mode, out=folder, search=search, policy=policy)


class Waiter:
    """Waits on a session's events (never a fixed time) until a condition holds."""

    def __init__(self, session: Session):
        self.session = session
        self.changed = threading.Condition()
        session.subscribe(self, replay=False)

    def __call__(self, _event) -> None:
        with self.changed:
            self.changed.notify_all()

    def until(self, condition, what: str, timeout: float = 180) -> None:
        with self.changed:
            if not self.changed.wait_for(condition, timeout):
                raise AssertionError(f"no {what} within {timeout} s; events: "
                                     f"{[e.kind for e in self.session.events]}; "
                                     f"error {self.session.error}")


def finished(session) -> bool:
    return any(e.kind == "finished" for e in list(session.events))


def count(session, kind: str) -> int:
    return sum(e.kind == kind for e in list(session.events))


@pytest.fixture(scope="module")
def beam(tmp_path_factory):
    """A finished beam search (width 2): two seeds, then each round expands both lineages."""
    session = make_session(tmp_path_factory.mktemp("beam"), policy=GoOn())
    session.run()
    assert session.error is None, session.error
    return session


def test_the_record_carries_the_search_and_where_each_candidate_came_from(beam):
    record = run_record(beam)
    json.dumps(record, allow_nan=False)                          # plain JSON data
    assert record["search"] == {"strategy": "beam", "width": 2, "pinned": [], "pruned": [],
                                "finished": sorted(beam.finished_branches)}
    by_id = {a.id: a for a in beam.history}
    assert [a["id"] for a in record["history"]] == [a.id for a in beam.history]
    for a in record["history"]:
        attempt = by_id[a["id"]]
        assert (a["parent"], a["lineage"]) == (attempt.parent, attempt.lineage)
        assert a["applied"] == (attempt.applied.title if attempt.applied else None)
    roots = [a for a in record["history"] if a["parent"] is None]
    assert sorted(a["id"] for a in roots) == ["0.0", "0.1"]       # the two seeds
    children = [a for a in record["history"] if a["parent"] is not None]
    assert children and all(a["parent"] in by_id for a in children)
    assert all(by_id[a["parent"]].iteration < a["iteration"] for a in children)
    assert any(a["applied"] for a in children)        # the recommendation each child applied
    assert record["recommendation"]["parent"] in by_id          # the candidate analysed

    beam.pin(beam.best.id)
    beam.prune("0.1")
    try:
        steered = run_record(beam)
        assert steered["search"]["pinned"] == [beam.best.id]
        assert steered["search"]["pruned"] == ["0.1"]
        assert [e["data"]["action"] for e in steered["events"] if e["kind"] == "steer"] == \
            ["pin", "prune"]
    finally:
        beam.pin(beam.best.id, False)
        beam.prune("0.1", False)


def test_the_text_and_html_fallbacks_show_the_tree(beam):
    beam.prune("0.1")
    try:
        record = run_record(beam)
        shown = bundle(record)
    finally:
        beam.prune("0.1", False)
    text = shown["text/plain"].splitlines()
    assert "finished: iteration budget used" in text[0]          # the summary comes first
    start = next(k for k, line in enumerate(text) if line.startswith("candidates tree"))
    assert text[start] == "candidates tree (beam, width 2; pruned 0.1):"
    tree = text[start + 1:]
    assert len(tree) == len(beam.history)
    for attempt in beam.history:
        line = next(line for line in tree if line.split()[0] == attempt.id)
        depth = (len(line) - len(line.lstrip())) // 2
        assert depth == len(beam.tree().path(attempt)) - 1       # indented under its parent
        if attempt.parent:
            assert f"<- {attempt.parent}" in line
            assert tree.index(line) > next(k for k, x in enumerate(tree)
                                           if x.split()[0] == attempt.parent)
        if attempt.result.state == "correct":
            assert re.search(r" correct [\d.e-]+ ms", line), line
        under = attempt.id != "0.1" and "0.1" in [n.id for n in beam.tree().path(attempt)]
        assert ("(under a pruned candidate)" in line) == under, line
    assert "pruned" in next(line for line in tree if line.split()[0] == "0.1")
    html = shown["text/html"]
    assert "candidates tree (beam, width 2; pruned 0.1)" in html
    # no script but the one that lets plotly draw the speedup chart where scripts run
    assert all("Plotly.newPlot" in script for script in re.findall(r"<script>(.*?)</script>",
                                                                    html, re.S))
    assert not re.search(r"<[^>]*\son\w+\s*=", html)
    assert html.count('<div style="padding-left:') == len(beam.history)   # a row each
    assert html.count('<div style="padding-left:0px') == 2                # the two seeds


def test_a_record_saved_before_the_search_still_draws_every_candidate_as_a_root(beam):
    record = run_record(beam)
    record.pop("search")
    record.pop("tree")                               # laid out since (fallback.tree_layout)
    for a in record["history"]:
        for key in ("parent", "lineage", "applied"):
            a.pop(key)
    rows = fallback.tree_rows(record)
    assert [depth for depth, _, _ in rows] == [0] * len(beam.history)
    assert "candidates tree" not in fallback.to_text(record)    # the text says what it did
    html = fallback.to_html(record)
    assert "<summary>candidates tree</summary>" in html
    assert html.count('<div style="padding-left:0px') == len(beam.history)


def test_a_greedy_search_is_a_chain(tmp_path):
    session = make_session(tmp_path, search="greedy", iterations=2, policy=GoOn())
    session.run()
    record = run_record(session)
    assert record["search"]["strategy"] == "greedy" and record["search"]["width"] == 1
    rows = [(depth, a["id"]) for depth, a, _ in fallback.tree_rows(record)]
    assert rows == [(0, "0.0"), (1, "1.0")]
    # a plain climb says nothing the order does not: the text stays a few lines
    assert "candidates tree" not in fallback.to_text(record)
    assert "candidates tree (greedy, width 1)" in fallback.to_html(record)
    session.pin("0.0")                                           # steered: the text shows it
    text = fallback.to_text(run_record(session)).splitlines()
    assert text[-3:-2] == ["candidates tree (greedy, width 1; pinned 0.0):"]
    assert text[-2].startswith("0.0 correct") and "pinned" in text[-2]
    assert text[-1].startswith("  1.0 ") and "<- 0.0" in text[-1]


@needs_jsdom
def test_the_saved_view_draws_the_tree_without_buttons(beam, tmp_path):
    record = run_record(beam)
    child = next(a for a in reversed(beam.history) if a.parent)
    seen = render(tmp_path, "mime", record, [
        {"snapshot": "saved"},
        {"click": f'[data-role=tree-node][data-id="{child.id}"] > .kforge-tree-row '
                  'button[data-select]'},
        {"snapshot": "picked"}])
    saved, picked = seen["saved"], seen["picked"]
    assert saved["treeTitle"].startswith("Candidates tree · beam, width 2")
    nodes = {n["id"]: n for n in saved["tree"]}
    assert set(nodes) == {a.id for a in beam.history}
    for attempt in beam.history:
        assert nodes[attempt.id]["parent"] == attempt.parent     # nested in its parent's node
        assert nodes[attempt.id]["state"] == attempt.result.state
        assert nodes[attempt.id]["steer"] == []                  # no kernel: no buttons
    # children come in id order under each parent, after it
    order = [n["id"] for n in saved["tree"]]
    for attempt in beam.history:
        kids = [a.id for a in beam.history if a.parent == attempt.id]
        assert [i for i in order if i in kids] == sorted(kids, key=fallback.id_key)
    best = nodes[beam.best.id]
    assert "best" in best["flags"] and best["tags"]["best"] == "★ best"
    assert " ms" in best["row"]
    lineages = {n["tags"].get("lineage") for n in saved["tree"]}
    assert {"A", "B"} <= lineages                                # one label per lineage
    assert saved["sent"] == [] and saved["scripts"] == 0 and saved["handlers"] == 0
    # a click on an id shows that candidate, diffed against the one it was made from
    assert picked["selected"] == child.id and picked["sent"] == []
    assert f"diff against its parent, candidate {child.parent}" in picked["panes"]["code"]


@needs_jsdom
def test_a_record_saved_before_the_search_draws_in_the_view(beam, tmp_path):
    record = run_record(beam)
    record.pop("search")
    for a in record["history"]:
        for key in ("parent", "lineage", "applied"):
            a.pop(key)
    record["recommendation"].pop("parent")
    record.pop("tree")                               # laid out since (fallback.tree_layout)
    seen = render(tmp_path, "widget", record, [{"snapshot": "old"}])["old"]
    assert seen["treeTitle"] == "Candidates tree"
    assert [n["parent"] for n in seen["tree"]] == [None] * len(beam.history)
    assert sorted(n["id"] for n in seen["tree"]) == sorted(a.id for a in beam.history)


def test_steering_a_finished_session_is_refused(beam):
    from kforge_nb.ui.widget import RunWidget
    widget = RunWidget(beam)
    steered = count(beam, "steer")
    for action in ("pin", "unpin", "prune", "unprune"):
        widget.handle_message({"action": action, "id": "0.0"})
        assert widget.message == f"the session has already finished: {action} not sent"
    assert beam.pinned == set() and beam.pruned == set()
    assert count(beam, "steer") == steered                      # nothing reached the session


@pytest.mark.slow     # a whole search session steered from the view
def test_prune_and_pin_sent_by_the_live_view_reach_the_search(tmp_path):
    """A review-mode beam search waits on its first recommendation: the view's Prune (clicked
    in jsdom where node is here, else the message it sends) goes through the widget to the
    session, the record shows it at once, and the rounds after never expand the pruned branch."""
    from kforge_nb.ui.widget import RunWidget
    session = make_session(tmp_path, mode="review")
    waiter = Waiter(session)
    widget = RunWidget(session)
    session.start()
    try:
        waiter.until(lambda: session.pending, "recommendation")
        analysed = next(e for e in reversed(session.events) if e.kind == "recommendation")
        asked_about = analysed.data["parent"]
        other = next(a.id for a in session.history if a.parent is None and a.id != asked_about)
        record = widget.record
        assert record["running"] and record["pending"]
        assert record["recommendation"]["parent"] == asked_about

        message = {"action": "prune", "id": other}
        if shutil.which("node") and (LABEXTENSION / "node_modules" / "jsdom").is_dir():
            seen = render(tmp_path, "widget", record, [
                {"snapshot": "live"},
                {"click": f'[data-role=tree-node][data-id="{other}"] > .kforge-tree-row '
                          'button[data-steer=prune]'},
                {"snapshot": "sent"}])
            live = {n["id"]: n for n in seen["live"]["tree"]}
            assert live[other]["steer"] == ["pin", "prune"]      # live and running: buttons
            assert seen["sent"]["sent"] == [message]             # exactly what the widget reads
            assert all(s.endswith("(disabled)") for n in seen["sent"]["tree"]
                       for s in n["steer"])                      # until the kernel answers
            message = seen["sent"]["sent"][0]

        widget.handle_message(message)                           # no decision is needed
        assert widget.message == f"pruned {other} and its descendants"
        assert session.pruned == {other}
        assert widget.record["search"]["pruned"] == [other]      # pushed at once ("steer")
        assert widget.record["pending"]                          # still waiting on its answer

        widget.handle_message({"action": "pin", "id": "9.9"})   # errors are the reply
        assert widget.message.startswith("no candidate '9.9' to pin")
        wrong = session.evaluate_code(candidate_source("cpp_leaky_relu"))
        assert wrong.result.state == "mismatch"
        widget.handle_message({"action": "pin", "id": wrong.id})
        assert "only a correct candidate can be pinned" in widget.message
        widget.handle_message({"action": "pin", "id": asked_about})
        assert widget.message.startswith(f"pinned {asked_about}")
        assert session.pinned == {asked_about}
        widget.handle_message({"action": "unpin", "id": asked_about})
        assert widget.message == f"unpinned {asked_about}" and session.pinned == set()
        widget.handle_message({"action": "prune"})
        assert "needs the id of a candidate" in widget.message

        if shutil.which("node") and (LABEXTENSION / "node_modules" / "jsdom").is_dir():
            after = render(tmp_path, "widget", widget.record, [{"snapshot": "after"}])["after"]
            nodes = {n["id"]: n for n in after["tree"]}
            assert {"pruned", "greyed"} <= set(nodes[other]["flags"])
            assert nodes[other]["steer"] == ["unprune"]
            assert nodes[asked_about]["steer"] == ["pin", "prune"]

        for _ in range(10):            # answer every recommendation until the run ends (a
            #                            redirect always goes on, whatever the analyst says)
            waiter.until(lambda: finished(session) or session.pending,
                         "recommendation or end")
            if finished(session):
                break
            decided = count(session, "decision")
            widget.handle_message({"action": "redirect", "text": GO_ON})
            waiter.until(lambda: count(session, "decision") > decided or finished(session),
                         "decision")
    finally:
        session.stop()
        session.wait(180)

    assert finished(session) and session.error is None, session.error
    tree = session.tree()
    later = [a for a in session.history if a.iteration > analysed.iteration]
    assert later and not any(tree.blocked(a) for a in later)   # nothing grew from the pruned
    asked = [e.data["parent"] for e in session.events
             if e.kind == "recommendation" and e.iteration > analysed.iteration]
    assert other not in asked and all(not tree.blocked(tree.by_id[p]) for p in asked)
    final = widget.record
    assert final["state"] == "finished" and final["search"]["pruned"] == [other]
