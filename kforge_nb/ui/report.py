"""The run record: everything a view of a session shows, as plain data, and the MIME bundle that
carries it in a notebook cell.

    run_record(session)   the one description of a run (JSON-able; data only, never HTML)
    bundle(record)        application/vnd.kforge.run+json, with text/html and text/plain fallbacks
    RunDisplay            a run's one output in a cell: the live widget, then the bundle

One front-end view draws the record (labextension/src/view.ts): live in the anywidget of
widget.py while the run goes, and once it has ended (in the bundle, which a saved notebook
keeps) as JupyterLab's renderer of the MIME type. The fallbacks
(fallback.py) are for GitHub, nbviewer, VS Code and untrusted notebooks, where neither runs.
"""
from __future__ import annotations

import threading

from . import fallback
from ..artifacts import finite
from ..agents.history import reason
from .fallback import id_key
from ..session.confirm import sentence as confirm_sentence
from ..session.events import Event

MIME = "application/vnd.kforge.run+json"
RECORD_VERSION = 2
UPDATE_ON = {"started", "evaluated", "recommendation", "decision", "steer", "notice",
             "retry", "evaluation_step", "duel", "confirming", "confirmed", "finished"}
MAX_KERNEL_EVENTS = 300     # timeline events of the best candidate, per lane
TOP_KERNELS = 8             # kernels per lane in each candidate's profile table
MAX_ERROR_MAPS = 8          # the latest candidates whose |candidate - reference| map is kept


def run_record(session) -> dict:
    """The session as a view needs it: header facts, progress, every candidate (verdict,
    timings, code, top kernels, error map, where it came from), the search (strategy, width,
    what the person pinned and pruned), the recommendation and whether it waits for a decision,
    the decisions taken, the best candidate's kernel timeline and the event log.

    Records saved before the search existed lack "search" and each candidate's "parent",
    "lineage" and "applied": views read a missing parent as a root (RECORD_VERSION is the same:
    the keys are additions). "tree" (fallback.tree_layout) is the candidates tree as drawn;
    records saved before it lack it, and view.ts then lists the candidates flat."""
    events = list(session.events)
    history = list(session.history)
    best = session.best
    run = events[last_index(events, "started") or 0:]          # this run's (a resumed one's)
    started = next((e for e in run if e.kind == "started"), None)
    finished = next((e for e in reversed(run) if e.kind == "finished"), None)
    iterations = started.data["iterations"] if started else session.budget.iterations
    with_map = [a.id for a in history if a.result.correctness.error_map][-MAX_ERROR_MAPS:]
    ties = session.ties if hasattr(session, "ties") else {}
    record = {
        "version": RECORD_VERSION,
        "run_id": session.folder.name,
        "state": "finished" if finished else "running",
        "running": finished is None,
        "mode": session.mode,
        "summary": session.summary(),
        "model": started.data.get("model") if started else None,
        "device": started.data.get("device") if started else None,
        "timing_note": timing_note(started, history),
        "busy": busy_record(history),
        "progress": {"iteration": current_iteration(run, iterations), "iterations": iterations},
        # the trials asked for (--trials); a verdict's count has one more, at another batch
        # size, where its shape could change (EvalOptions.trial_plan)
        "trials": max(1, session.options.trials),
        "status": status_line(run, iterations, best),
        "notices": list(dict.fromkeys(e.data["text"] for e in run if e.kind == "notice")),
        "confirmation": next((confirm_sentence(e.data) for e in reversed(run)
                              if e.kind == "confirmed"), None),
        "best_id": best.id if best else None,
        "best": {"id": best.id, "iteration": best.iteration, "sample": best.sample,
                 "code": best.code} if best else None,
        "history": [attempt_record(a, a.id in with_map, ties.get(a.id)) for a in history],
        "search": search_record(session),
        "recommendation": latest_recommendation(run),
        "pending": session.pending,
        "decisions": [{"iteration": e.iteration, "kind": e.data["kind"],
                       "text": e.data.get("text") or ""} for e in run if e.kind == "decision"],
        "profile": timeline(best),
        "events": [compact_event(e) for e in events],
    }
    record["tree"] = fallback.tree_layout(record)
    return finite(record)


def attempt_record(a, keep_map: bool, tie_with: str | None = None) -> dict:
    """One candidate: its verdict without the bulky parts, its top kernels per lane, and its
    error map when kept (values to 4 significant digits); `same_as`: the earlier candidate
    whose code it repeats (not judged again), `tie_with`: the best it tied with (side by side
    where its head-to-head says so; the best stayed). The verdict's timing keeps, whole, its
    head-to-head with the best of its time (`versus`) and its own time (`candidate_low_ms`):
    the views lead with them under load (intervals.py)."""
    r = a.result.to_dict()
    profile = r.pop("profile", None) or {}
    # the Profile tab labels its one profiled call and sets it beside the timed median
    r["profile"] = {key: profile.get(key) for key in ("trace", "reference_trace", "note",
                                                      "profiled_calls")}
    emap = (r.get("correctness") or {}).pop("error_map", None)
    if emap and keep_map:
        emap = {**emap, "values": rounded(emap["values"])}
    kernels = {lane: top_kernels(profile.get(f"{lane}_events"))
               for lane in ("candidate", "reference")} if profile.get("candidate_events") else None
    if kernels:      # each lane's whole kernel time in its one profiled call
        r["profile"]["kernel_us"] = {lane: round(sum(float(e["duration_us"]) for e in
                                                     profile.get(f"{lane}_events") or []), 2)
                                     for lane in ("candidate", "reference")}
    return {"id": a.id, "iteration": a.iteration, "sample": a.sample, "kind": a.kind,
            "code": a.code, "result": r, "kernels": kernels,
            "error_map": emap if keep_map else None,
            "error_map_dropped": bool(emap) and not keep_map,     # only the latest are kept
            "recommendation": a.recommendation.title if a.recommendation else None,
            "decision": a.decision.kind if a.decision else None,
            "decision_text": a.decision.text if a.decision else None,
            "parent": a.parent, "lineage": a.lineage,
            "applied": a.applied.title if a.applied else None,
            "same_as": getattr(a, "same_as", None), "tie_with": tie_with,
            "agent_notes": a.generation.notes if getattr(a, "generation", None) else None}


def search_record(session) -> dict:
    """The search over candidates: its strategy and width, and the ids the person pinned
    (expanded every round) and pruned (never expanded again, nor their descendants), and
    those the analyst had nothing more for (finished)."""
    return {"strategy": session.search.name, "width": session.search.width,
            "pinned": sorted_ids(session.pinned), "pruned": sorted_ids(session.pruned),
            "finished": sorted_ids(session.finished_branches)}


def sorted_ids(ids) -> list[str]:
    return sorted((str(i) for i in set(ids)), key=id_key)


def top_kernels(events: list[dict] | None) -> list[dict]:
    """[{"name", "calls", "total_us"}], the slowest TOP_KERNELS by total time."""
    totals: dict[str, list[float]] = {}
    for e in events or []:
        totals.setdefault(e["name"], []).append(float(e["duration_us"]))
    ranked = sorted(totals.items(), key=lambda kv: -sum(kv[1]))[:TOP_KERNELS]
    return [{"name": name[:120], "calls": len(d), "total_us": round(sum(d), 2)}
            for name, d in ranked]


def timeline(best) -> dict:
    """The best candidate's kernel events, reference and candidate lanes, the longest kept."""
    p = (best.result.profile or {}) if best else {}
    return {key: sorted(p.get(key) or [], key=lambda e: -e["duration_us"])[:MAX_KERNEL_EVENTS]
            for key in ("reference_events", "candidate_events")}


def busy_record(history: list) -> dict | None:
    """{"ids": the candidates timed while the machine was busy, "note": the latest's busy_note}
    for the banner every view draws; None when no timing was busy."""
    busy = [a for a in history if a.result.timing.busy and not getattr(a, "same_as", None)]
    if not busy:
        return None
    return {"ids": [a.id for a in busy], "note": busy[-1].result.timing.busy_note or ""}


def timing_note(started: Event | None, history: list) -> str | None:
    """Why timings are not performance figures here (the target's note, or an unreal timing)."""
    if started and started.data.get("timing_note"):
        return started.data["timing_note"]
    unreal = [a for a in history if a.result.ok and not a.result.timing.real]
    return (unreal[-1].result.timing.note or "not a real timing") if unreal else None


def current_iteration(run: list[Event], iterations: int) -> int:
    """1-based: the iteration under way (or the last one)."""
    begun = [e.iteration for e in run
             if e.kind in ("started", "iteration_started", "recommendation")]
    return min(max(begun, default=0) + 1, max(iterations, 1))


def latest_recommendation(run: list[Event]) -> dict | None:
    k = last_index(run, "recommendation")
    if k is None:
        return None
    d = run[k].data
    decision = next((e.data["kind"] for e in run[k:] if e.kind == "decision"), None)
    return {"iteration": run[k].iteration, "title": d.get("title", ""),
            "text": d.get("text", ""), "expected_gain": d.get("expected_gain"),
            "decision": decision, "parent": d.get("parent")}


def status_line(run: list[Event], iterations: int, best) -> str:
    """What the session is doing now, in one line."""
    shown = [e for e in run if e.kind not in ("usage", "notice", "steer")]   # steer: the tree
    if not shown:
        return "starting…"
    e, d = shown[-1], shown[-1].data
    at = f"iteration {min(e.iteration + 1, iterations)}/{iterations}"
    if e.kind == "started":
        return "started: generating the first candidate…"
    if e.kind == "iteration_started":
        return f"{at}: {d['phase']} pass, generating ({d['kind']})…"
    if e.kind == "candidate_generated":
        what = "evaluating…" if d.get("code") else f"no code: {d.get('failure')}"
        return f"{at}: candidate {e.iteration}.{d['sample']} {what}"
    if e.kind == "evaluation_step":
        return f"{at}: candidate {d['id']} evaluating: {d['text']}"
    if e.kind == "retry":
        return (f"{at}: {d['service']} attempt {d['attempt']} of {d['attempts']} failed "
                f"({d['reason']}); retrying in {d['wait_s']:.1f} s")
    if e.kind == "evaluated":
        said = reason(d["result"]["state"], d["result"]["message"])     # whole, never cut
        return f"candidate {e.iteration}.{d['sample']}: {d['result']['state']} ({said})"
    if e.kind == "recommendation":
        return f"{at}: recommendation: {d['title']}"
    if e.kind == "decision":
        return f"{at}: decision: {d['kind']}"
    if e.kind == "duel":
        return f"{at}: timed side by side to decide: {d['text']}"
    if e.kind == "confirming":
        return f"final judging: candidates {', '.join(d['finalists'])} judged again…"
    if e.kind == "confirmed":
        return confirm_sentence(d)
    if e.kind == "finished":
        return (f"finished: {d.get('reason') or 'ended'}; "
                + (f"best is candidate {best.id}" if best else "no correct candidate"))
    return e.kind


def compact_event(e: Event) -> dict:
    """An event without bulky payloads (code and full results live in `history`)."""
    d = e.data
    keep = {"evaluated": lambda: {"sample": d["sample"], "state": d["result"]["state"],
                                  "best": d.get("best"),
                                  **{k: d[k] for k in ("same_as", "tie_with") if d.get(k)}},
            "candidate_generated": lambda: {"sample": d["sample"], "failure": d.get("failure")},
            "finished": lambda: {"reason": d.get("reason"), "iterations": d.get("iterations")},
            }.get(e.kind, lambda: {k: v for k, v in d.items()
                                   if k not in ("code", "usage", "best")})
    return {"kind": e.kind, "iteration": e.iteration, "time": e.time, "data": keep()}


def last_index(events: list[Event], kind: str) -> int | None:
    return next((k for k in range(len(events) - 1, -1, -1) if events[k].kind == kind), None)


def rounded(values):
    if isinstance(values, list):
        return [rounded(v) for v in values]
    return float(f"{values:.4g}")


def bundle(record: dict) -> dict:
    return {MIME: record, "text/html": fallback.to_html(record),
            "text/plain": fallback.to_text(record)}


def register_display(ipython) -> None:
    """Show a Session as its report wherever IPython displays it (the session layer knows
    nothing of views: this is how `_kforge` alone in a cell gets one)."""
    from ..session import Session
    ipython.display_formatter.mimebundle_formatter.for_type(
        Session, lambda session, include=None, exclude=None: bundle(run_record(session)))


class RunDisplay:
    """A run's one output in a notebook cell, shown once and changed in place (display_id).

    At a frontend it is the live widget while the session runs, and when the session ends the
    kernel replaces it with the final bundle: what the notebook then saves is the record, which
    JupyterLab's renderer (index.ts), nbviewer and GitHub draw without the kernel; a widget
    saved in a notebook would read "model not found" when reopened. Without a widget (headless:
    nbclient, papermill; or no anywidget) it is the bundle from the start, updated as the
    session goes on, which a headless executor saves. One output at a time: the browser never
    reconciles two views of one run."""

    def __init__(self, session, shell=None):
        self.session, self.shell = session, shell
        self.handle = None
        self.live = False            # the output is the widget (until the session ends)
        self.ended = False           # the final bundle is out
        self._parent = None
        self._lock = threading.Lock()

    def show(self, widget=None, headless: bool = False) -> None:
        """`headless` (nbclient, papermill): updates go out under whichever cell is running
        then, which a headless executor reads, and it updates the report by its display id
        in the magic's cell; it drops messages of a cell that has returned. At a frontend they
        go to the magic's cell (its output area takes them)."""
        from IPython.display import display
        pub = getattr(self.shell, "display_pub", None)
        self._parent = None if headless else getattr(pub, "parent_header", None)
        with self._lock:
            self.ended = self.session.finished
            self.live = widget is not None and not self.ended
            shown = widget if self.live else bundle(run_record(self.session))
            self.handle = display(shown, raw=not self.live, display_id=True)
        self.session.subscribe(self, replay=False)     # what is shown holds the past
        if self.session.finished:
            self.end()          # it ended between the display and the subscription

    def __call__(self, event: Event) -> None:
        if event.kind == "finished":
            self.end()
        elif not self.live and event.kind in UPDATE_ON:
            self._update()
        # while the widget is the output it follows the session itself (widget.py)

    def end(self) -> None:
        """The session ended: its final bundle is the output (in the widget's place)."""
        with self._lock:
            if self.ended:
                return
            self.ended, self.live = True, False
        self._update()

    def _update(self) -> None:
        """The output becomes the current bundle."""
        with self._lock:
            pub = getattr(self.shell, "display_pub", None)
            if self._parent and threading.current_thread() is not threading.main_thread() \
                    and hasattr(pub, "set_thread_parent"):
                pub.set_thread_parent(self._parent)   # route the update to the magic's cell
            self.handle.update(bundle(run_record(self.session)), raw=True)
