"""The live view of a Session in a notebook: an anywidget whose front end is the run-record view
(labextension/src/view.ts, bundled to static/view.js) and whose one synced trait is the record.

    Python -> browser   `record` (report.run_record: data only), refreshed as events arrive
                        (at most every `interval` seconds; at once for the events a person waits
                        on), and `message`, the reply to the person's last action
    browser -> Python   model.send({"action": "accept" | "edit" | "redirect" | "skip" | "stop" |
                        "evaluate", "text": ..., "code": ...}) -> handle_message, and
                        model.send({"action": "pin" | "unpin" | "prune" | "unprune", "id": ...})
                        from the candidates tree (steering the search: session.pin / prune)

A message hands a decision to the Session and returns; "evaluate" judges the editor's code in a
background thread. Tests send handle_message exactly what the browser sends.

The widget is the cell's output only while the run goes: when it ends, report.RunDisplay puts
the final bundle in its place (what a saved notebook keeps).
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

import anywidget
import traitlets

from .report import run_record
from ..session.events import Event

STATIC = Path(__file__).parent / "static"
AT_ONCE = {"started", "recommendation", "decision", "steer", "confirmed", "finished"}
# the candidates tree's actions: the Session method, whether it sets or clears, the reply
STEER = {"pin": ("pin", True, "pinned {id}: expanded every round"),
         "unpin": ("pin", False, "unpinned {id}"),
         "prune": ("prune", True, "pruned {id} and its descendants"),
         "unprune": ("prune", False, "unpruned {id}")}


class RunWidget(anywidget.AnyWidget):
    _esm = STATIC / "view.js"
    _css = STATIC / "view.css"
    record = traitlets.Dict().tag(sync=True)
    message = traitlets.Unicode("").tag(sync=True)

    def __init__(self, session, interval: float = 0.25):
        self.session, self.interval = session, interval
        super().__init__(record=run_record(session))
        self._lock = threading.Lock()
        self._pushed = time.monotonic()
        self._timer: threading.Timer | None = None
        self.on_msg(lambda _widget, content, _buffers: self.handle_message(content))
        session.subscribe(self, replay=False)       # the record above already holds the past

    def __repr__(self) -> str:
        # the widget output's text/plain: what a kernel-less notebook saved mid-run shows for it
        p = self.session.problem.name
        return (f"kforge live view: {p} on {self.session.target.name} (its report replaces it "
                f"at the end)")

    # --- session -> browser -------------------------------------------------------------------
    def __call__(self, event: Event) -> None:
        if event.kind == "decision":
            self.message = ""                     # the answer arrived: "sent: …" is stale
        if event.kind in AT_ONCE or time.monotonic() - self._pushed >= self.interval:
            self.push()
        else:
            with self._lock:
                if self._timer is None:
                    self._timer = threading.Timer(self.interval, self.push)
                    self._timer.daemon = True
                    self._timer.start()

    def push(self) -> None:
        """Send the current record now (a pending throttled push is folded into it)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._pushed = time.monotonic()
            self.record = run_record(self.session)

    # --- browser -> session -------------------------------------------------------------------
    def handle_message(self, content: dict) -> threading.Thread | None:
        """One action from the view; returns the thread judging an "evaluate" request."""
        action = (content or {}).get("action")
        self.message = ""       # a reply always changes `message`, so the view redraws its buttons
        if action == "evaluate":
            return self._evaluate(str(content.get("code") or ""))
        if action in STEER:
            self._steer(action, content.get("id"))
            return None
        if action not in ("accept", "edit", "redirect", "skip", "stop"):
            self.message = f"unknown action {action!r}"
            return None
        if self.session.finished:
            self.message = f"the session has already finished: {action} not sent"
            return None
        if action != "stop" and not self.session.pending:
            self.message = f"no recommendation is waiting for a decision: {action} not sent"
            return None
        try:
            if action in ("edit", "redirect"):
                getattr(self.session, action)(str(content.get("text") or ""))
            else:
                getattr(self.session, action)()
        except (ValueError, RuntimeError) as err:
            self.message = str(err)
            return None
        self.message = f"sent: {action}"
        return None

    def _steer(self, action: str, attempt_id) -> None:
        """Pin or prune a candidate of the tree; no pending recommendation is needed (the
        search reads pins and prunes when it next chooses its branches)."""
        if self.session.finished:
            self.message = f"the session has already finished: {action} not sent"
            return
        if attempt_id is None or not str(attempt_id).strip():
            self.message = f"{action} needs the id of a candidate: {action} not sent"
            return
        method, on, reply = STEER[action]
        try:
            getattr(self.session, method)(str(attempt_id).strip(), on)
        except ValueError as err:
            self.message = str(err)
            return
        self.message = reply.format(id=str(attempt_id).strip())

    def _evaluate(self, code: str) -> threading.Thread | None:
        if not code.strip():
            self.message = "the editor is empty: nothing to evaluate"
            return None
        self.message = "evaluating your edit…"

        def judge():
            attempt = self.session.evaluate_code(code, label="manual")
            # its verdict is the status line's and the tabs' (the view shows it): said once
            self.message = f"your edit is candidate {attempt.id}, shown in the tabs"
            self.push()
        thread = threading.Thread(target=judge, daemon=True, name="kforge-edit")
        thread.start()
        return thread
