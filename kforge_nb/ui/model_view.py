"""Views of a whole model's run (model/session.py): the parts table, the end-to-end line and
the model's timeline before and after, in the terminal and in a notebook.

Both subscribe to the ModelSession's events; the text table, the HTML table and the timeline
chart are made from the same summary rows, live and at the end.
"""
from __future__ import annotations

import base64
import html
import io
import sys

from ..baselines import common_mode, long_name, short_name
from ..intervals import speedup_text
from ..result import measures_line
from ..session.events import Event
from .terminal import Progress


def speed(value, real=True, ci=None) -> str:
    """A speedup (`1.42x ±6%` with its 95 % interval where the row has one), or `-` where
    there is none or the timing is not a performance figure."""
    return speedup_text(value, ci) if value and real is not False else "-"


def ci_of(row: dict, baseline: str = "eager"):
    """A row's interval of its speedup vs `baseline`: its own key, or its result's timing."""
    key = f"speedup_vs_{baseline}_ci"
    return row.get(key) or (((row.get("result") or {}).get("timing") or {}).get(key))


def parts_table(rows: list[dict]) -> str:
    """The parts as text, in the model's order: share of time, state, speedups, used (before
    any session ran: share, time and ops only)."""
    preview = all("ms" in r and "used" not in r for r in rows)
    head = ("part", "share", "ms", "uses", "ops") if preview else \
        ("part", "share", "uses", "ops", "state", "vs eager",
         f"vs {short_name(common_mode(rows))}", "in model")
    lines = [head]
    for r in rows:
        if preview:
            lines.append((str(r["part"]), f"{r['share']:.0%}", f"{r['ms']:.3g}",
                          f"x{r['occurrences']}", r["label"]))
            continue
        lines.append((str(r["part"]), f"{r['share']:.0%}", f"x{r['occurrences']}",
                      r["label"][:38], r["state"],
                      speed(r.get("speedup_vs_eager"), r.get("timing_real"), ci_of(r)),
                      speed(r.get("speedup_vs_compile"), r.get("timing_real"),
                            ci_of(r, "compile")),
                      "kernel" if r.get("used") else "as written"))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip()
                     for line in lines)


def end_to_end_line(e2e: dict) -> str:
    if not e2e:
        return "end to end: not judged"
    if e2e.get("state") is None:
        return f"end to end: not judged: {e2e['message']}"
    line = f"end to end: {e2e['state']}"
    if e2e.get("as_written"):
        line = f"end to end, the model as written ({e2e['why_as_written']}): {e2e['state']}"
    if e2e["state"] == "correct" and e2e.get("candidate_ms"):
        if e2e.get("timing_real"):
            line += (f", {e2e['candidate_ms']:.4g} ms vs eager {e2e['eager_ms']:.4g} ms "
                     f"({speed(e2e['speedup_vs_eager'], True, ci_of(e2e))})")
            if e2e.get("speedup_vs_compile"):
                line += (f", {speed(e2e['speedup_vs_compile'], True, ci_of(e2e, 'compile'))} "
                         f"vs {long_name(e2e.get('compile_mode'))}")
        else:
            line += f", {e2e['candidate_ms']:.4g} ms (not a performance figure)"
    else:
        line += f": {e2e['message'].splitlines()[0][:200]}"
    parts = ", ".join(map(str, e2e.get("kernels", []))) or "none"
    line += f"\n  kernels of parts {parts}; recomposed model: {e2e['path']}"
    if e2e.get("measures"):
        line += "\n  " + measures_line(e2e["measures"])
    return line


def summary_text(summary: dict) -> str:
    out = [parts_table(summary["parts"]), end_to_end_line(summary["end_to_end"])]
    if summary.get("error"):
        out.append(f"error: {summary['error']}")
    return "\n".join(out)


class TerminalModelProgress:
    """`kforge model`: the parts when found, each part's session as `kforge run` shows it
    (indented), and a line per finished part, on stderr."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.part_progress = Progress(_Indented(self.stream))

    def say(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def __call__(self, event: Event) -> None:
        d = event.data
        if event.kind == "decomposed":
            check = d["check"]["max_abs_error"]
            self.say(f"kforge model: {len(d['parts'])} distinct parts, {d['total_ms']:.4g} ms "
                     f"per forward on {d['device']} (parts' own code in order differs from the "
                     f"model by at most {check:.2g})")
            self.say(parts_table([part_preview(p) for p in d["parts"]]))
        elif event.kind == "part_started":
            self.say(f"part {d['part']} ({d['label']}): session in {d['artifacts']}")
        elif event.kind == "part_event":
            self.part_progress(Event(d["event"]["kind"], d["event"]["iteration"],
                                     d["event"]["data"]))
        elif event.kind == "part_finished":
            r = d["part"]
            self.say(f"part {r['part']}: {r['state']}, "
                     f"{speed(r.get('speedup_vs_eager'), r.get('timing_real'), ci_of(r))} "
                     "vs eager; "
                     f"{'kernel used' if r['used'] else 'kept as written'} ({r['why']})")
        elif event.kind == "recomposed":
            self.say(f"recomposed: {d['path']}")


class _Indented:
    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        return self.stream.write("".join(f"  {line}" if line.strip() else line
                                         for line in text.splitlines(keepends=True)))

    def flush(self) -> None:
        self.stream.flush()


def part_preview(part: dict) -> dict:
    """A decomposition entry as a table row before any session ran."""
    label = part["label"] + (" (layout only)" if part["glue"] else "")
    return {"part": part["id"], "share": part["share"], "ms": part["ms"],
            "occurrences": part["occurrences"], "label": label}


# --- the notebook -------------------------------------------------------------------------------

def summary_html(summary: dict, live_part: str = "", png: str | None = None) -> str:
    """The parts table, the end-to-end verdict and the timeline (`png`, drawn from the
    summary when not given), as one HTML block."""
    rows = []
    for r in summary["parts"]:
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in (
            r["part"], f"{r['share']:.0%}", f"x{r['occurrences']}", r["label"], r["state"],
            speed(r.get("speedup_vs_eager"), r.get("timing_real"), ci_of(r)),
            speed(r.get("speedup_vs_compile"), r.get("timing_real"), ci_of(r, "compile")),
            "kernel" if r.get("used") else "as written")) +
            f"<td title='{html.escape(r.get('why', ''))}'>{html.escape(r.get('why', ''))}</td></tr>")
    compiled = short_name(common_mode(summary["parts"]))
    head = "".join(f"<th>{h}</th>" for h in ("part", "share", "uses", "ops", "state", "vs eager",
                                               f"vs {compiled}", "in model", "why"))
    e2e = html.escape(end_to_end_line(summary.get("end_to_end") or {})).replace("\n", "<br>")
    png = png if png is not None else timeline_png(summary)
    chart = f"<img alt='timeline' src='data:image/png;base64,{png}'>" if png else ""
    live = f"<p>{html.escape(live_part)}</p>" if live_part else ""
    error = (f"<p><b>error:</b> {html.escape(summary['error'])}</p>"
             if summary.get("error") else "")
    return (f"<div class='kforge-model'><p><b>kforge model: {html.escape(summary['model'])}"
            f"</b> on {html.escape(summary['target'])} ({html.escape(summary['device'])})</p>"
            f"{live}<table><tr>{head}</tr>{''.join(rows)}</table><p>{e2e}</p>{error}{chart}"
            "</div>")


def timeline_png(summary: dict) -> str | None:
    """The model's timeline as a base64 PNG (None without matplotlib or data). Once judged end
    to end: the profiled forward of the model (before) and of the recomposed model (after),
    as the evaluator recorded them. Before that: the parts in order, each as long as it took
    inside the model's forward (measured while decomposing)."""
    profile = ((summary.get("end_to_end") or {}).get("result") or {}).get("profile") or {}
    lanes = {"before": profile.get("reference_events"), "after": profile.get("candidate_events")}
    if not all(lanes.values()):
        total = (summary.get("decomposition") or {}).get("total_ms")
        if not summary["parts"] or not total:
            return None
        lanes, start = {"before": []}, 0.0
        for r in summary["parts"]:
            lanes["before"].append({"name": f"part {r['part']}", "start_us": start * 1e3,
                                    "duration_us": r["ms"] * 1e3})
            start += r["ms"]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(8, 0.7 + 0.5 * len(lanes)))
    colours = plt.get_cmap("tab20")
    names = sorted({e["name"] for events in lanes.values() for e in events})
    for lane, events in enumerate(reversed(list(lanes.values()))):
        for e in events:
            ax.barh(lane, e["duration_us"] / 1e3, left=e["start_us"] / 1e3, height=0.6,
                    color=colours(names.index(e["name"]) % 20), edgecolor="white", alpha=0.8)
    ax.set_yticks(range(len(lanes)), list(reversed(list(lanes))))
    ax.set_xlabel("ms (one profiled forward)", fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


class NotebookModelView:
    """`%%kforge --whole-model`: a live HTML block redrawn on each event that changes the
    table, under it the part under way; the final block keeps no widget state."""

    def __init__(self, session, display_id: str | None = None):
        from IPython.display import HTML, display
        self.session, self.HTML = session, HTML
        self.live_part = ""
        self.png = ""               # the timeline changes only when the model is decomposed or
        #                             judged end to end: not redrawn for every part's event
        self.handle = display(HTML(summary_html(session.summary(), "decomposing the model...")),
                              display_id=display_id or True)

    def __call__(self, event: Event) -> None:
        d = event.data
        if event.kind == "part_started":
            self.live_part = f"part {d['part']} ({d['label']}): starting"
        elif event.kind == "part_event":
            e = d["event"]
            if e["kind"] == "evaluated":
                r = e["data"]["result"]
                t = r["timing"]
                self.live_part = (f"part {d['part']}: iteration {e['iteration']}: {r['state']}"
                                  + (f", {speed(t['speedup_vs_eager'], True, ci_of(t))} "
                                     "vs eager" if r["state"] == "correct" and
                                     t.get("speedup_vs_eager") else ""))
            else:
                return
        elif event.kind == "recomposed":
            self.live_part = "judging the recomposed model end to end..."
        elif event.kind == "finished":
            self.live_part = ""
        elif event.kind not in ("decomposed", "part_finished", "end_to_end"):
            return
        summary = self.session.summary()
        if event.kind in ("decomposed", "end_to_end", "finished"):
            self.png = timeline_png(summary) or ""
        self.handle.update(self.HTML(summary_html(summary, self.live_part, self.png)))
