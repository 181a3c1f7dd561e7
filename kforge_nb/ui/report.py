"""The saved record of a run: a MIME bundle `application/vnd.kforge.run+json` with HTML and text
fallbacks, kept up to date in the cell's output through an IPython display handle.

The JSON is what the labextension draws; the HTML (inline styles, no script) is what GitHub,
VS Code and nbviewer show; the text is what a terminal shows. All three come from one record.
"""
from __future__ import annotations

import threading

from . import charts, html as h
from ..session.events import Event

MIME = "application/vnd.kforge.run+json"
RECORD_VERSION = 1
UPDATE_ON = {"started", "evaluated", "recommendation", "decision", "notice", "finished"}
MAX_KERNEL_EVENTS = 300


def run_record(session, running: bool | None = None) -> dict:
    """Summary, every candidate (verdict, timings, code), the event log, the best's profile."""
    summary = session.summary()
    history = [attempt_record(a) for a in list(session.history)]
    best = session.best
    profile = {}
    if best is not None:
        p = best.result.profile or {}
        profile = {key: sorted(p.get(key) or [], key=lambda e: -e["duration_us"])
                   [:MAX_KERNEL_EVENTS] for key in ("reference_events", "candidate_events")}
        profile.update(trace=p.get("trace"), reference_trace=p.get("reference_trace"))
    started = next((e for e in session.events if e.kind == "started"), None)
    return {
        "version": RECORD_VERSION, "summary": summary, "running": session.running if running is None else running,
        "mode": session.mode,
        "device": started.data.get("device") if started else None,
        "timing_note": started.data.get("timing_note") if started else None,
        "best": {"iteration": best.iteration, "sample": best.sample, "code": best.code}
        if best else None,
        "history": history, "profile": profile,
        "events": [compact_event(e) for e in list(session.events)],
    }


def attempt_record(a) -> dict:
    r = a.result.to_dict()
    r["profile"] = {k: v for k, v in (r.get("profile") or {}).items() if not k.endswith("events")}
    if r.get("correctness"):
        r["correctness"] = {k: v for k, v in r["correctness"].items() if k != "error_map"}
    return {"iteration": a.iteration, "sample": a.sample, "kind": a.kind, "code": a.code,
            "result": r,
            "recommendation": a.recommendation.title if a.recommendation else None,
            "decision": a.decision.kind if a.decision else None}


def compact_event(e: Event) -> dict:
    """An event without bulky payloads (code and full results live in `history`)."""
    d = e.data
    keep = {"evaluated": lambda: {"sample": d["sample"], "state": d["result"]["state"],
                                  "best": d.get("best")},
            "candidate_generated": lambda: {"sample": d["sample"], "failure": d.get("failure")},
            "finished": lambda: {"reason": d.get("reason"), "iterations": d.get("iterations")},
            }.get(e.kind, lambda: {k: v for k, v in d.items() if k not in ("code", "usage")})
    return {"kind": e.kind, "iteration": e.iteration, "time": e.time, "data": keep()}


def bundle(record: dict) -> dict:
    return {MIME: record, "text/html": to_html(record), "text/plain": to_text(record)}


# --- fallbacks ------------------------------------------------------------------------------

def headline(record: dict) -> str:
    s = record["summary"]
    state = "running" if record.get("running") else (s.get("reason") or "not started")
    speed = ""
    if s.get("speedup_vs_eager"):
        speed = f"; best {s['candidate_ms']:.4g} ms, {s['speedup_vs_eager']:.2f}x vs eager"
        if s.get("speedup_vs_compile"):
            speed += f", {s['speedup_vs_compile']:.2f}x vs torch.compile"
    return (f"kforge: {s['problem']} on {s['target']} ({record.get('device') or '?'}), "
            f"{s['provider'] or 'provider pending'}; {s['candidates']} candidates over "
            f"{s['iterations']} iterations; {state}{speed}")


def to_text(record: dict) -> str:
    s = record["summary"]
    lines = [headline(record)]
    if record.get("timing_note") or s.get("timing_real") is False:
        lines.append(f"NOTE: timings are not performance figures: {record.get('timing_note') or ''}")
    for a in record["history"]:
        r, t = a["result"], a["result"].get("timing") or {}
        lines.append(f"  {a['iteration']}.{a['sample']} {a['kind']:<9} {r['state']:<18} "
                     + (f"{t['candidate_ms']:.4g} ms  {t.get('speedup_vs_eager') or 0:.2f}x eager"
                        if t.get("candidate_ms") else r["message"].splitlines()[0][:70]))
    lines.append(f"tokens {s['input_tokens']} in / {s['output_tokens']} out, ${s['cost_usd']:.4f}; "
                 f"artifacts: {s['artifacts']}")
    if s.get("error"):
        lines.append(f"error: {s['error']}")
    return "\n".join(lines)


def to_html(record: dict) -> str:
    s = record["summary"]
    best = record.get("best")
    parts = [f'<div style="{h.FONT};border:1px solid #ccc;border-radius:4px;padding:8px">',
             f'<div style="font-size:15px"><b>kforge</b> · {h.esc(headline(record)[8:])}</div>']
    if record.get("timing_note") or s.get("timing_real") is False:
        parts.append(h.note("timings are not performance figures: "
                            + (record.get("timing_note") or "")))
    if s.get("error"):
        parts.append(h.note(s["error"]))
    key = (best["iteration"], best["sample"]) if best else None
    parts.append(h.iterations(record["history"], key))
    points = charts.performance_points(record["history"])
    if points:
        parts.append(charts.speedups(points))
    if best:
        parts.append(f'<div><b>best kernel</b> (candidate {best["iteration"]}.{best["sample"]})'
                     f'</div>{h.code(best["code"])}')
    parts.append(f'<div style="color:#555">tokens {s["input_tokens"]} in / {s["output_tokens"]} '
                 f'out · ${s["cost_usd"]:.4f} · {s["elapsed_s"]} s · artifacts '
                 f'<code>{h.esc(s["artifacts"])}</code></div></div>')
    return "".join(parts)


# --- the live cell output -------------------------------------------------------------------

class ReportView:
    """Shows the bundle once, then updates it in place (display_id) as the session goes on."""

    def __init__(self, session, shell=None):
        self.session, self.shell = session, shell
        self.handle = None
        self._parent = None
        self._lock = threading.Lock()
        session.subscribe(self)

    def show(self) -> None:
        from IPython.display import display
        pub = getattr(self.shell, "display_pub", None)
        self._parent = getattr(pub, "parent_header", None)   # the cell that ran %%kforge
        self.handle = display(bundle(run_record(self.session)), raw=True, display_id=True)

    def __call__(self, event: Event) -> None:
        if self.handle is None or event.kind not in UPDATE_ON:
            return
        with self._lock:
            pub = getattr(self.shell, "display_pub", None)
            if self._parent and threading.current_thread() is not threading.main_thread() \
                    and hasattr(pub, "set_thread_parent"):
                pub.set_thread_parent(self._parent)   # route the update to the magic's cell
            running = False if event.kind == "finished" else None
            self.handle.update(bundle(run_record(self.session, running)), raw=True)
