"""The run record where no kforge view runs: GitHub, nbviewer, VS Code without the widget, an
untrusted notebook, a terminal.

The HTML survives sanitising: inline styles, no script, no inline SVG (JupyterLab strips it from
untrusted HTML and leaves its text behind); the speedup chart is a PNG in a data URI, drawn with
matplotlib when it is installed (the `notebook` extra), else the table alone carries the numbers.
The text is a few lines.
"""
from __future__ import annotations

import base64
import html
import io
from functools import lru_cache

from ..result import measures_line

STATE_COLOURS = {
    "correct": "#2e7d32", "mismatch": "#ef6c00", "compile_failure": "#c62828",
    "runtime_error": "#ad1457", "rejected": "#6a1b9a", "generation_failure": "#616161",
    "unavailable": "#455a64",
}
FONT = "font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;font-size:13px"
CELL = "border:1px solid #ddd;padding:2px 8px;text-align:left"
NOTE = "background:#fff3cd;border-left:6px solid #e0a800;padding:4px 8px;margin:4px 0;color:#5c4400"


def esc(value) -> str:
    return html.escape(str(value))


def fmt(value, spec: str = ".4g", suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def headline(record: dict) -> str:
    s = record["summary"]
    where = f"{s['problem']} on {s['target']} ({record.get('device') or '?'})"
    if record["state"] == "running":
        p = record["progress"]
        state = f"running: iteration {p['iteration']}/{p['iterations']}"
    else:
        state = f"finished: {s.get('reason') or 'ended'}"
    return f"kforge: {where} · {s.get('provider') or 'provider pending'} · {state}"


def best_line(record: dict) -> str:
    s = record["summary"]
    line = f"{s['candidates']} candidates over {s['iterations']} iterations"
    if record.get("best_id") and s.get("candidate_ms") is not None:
        line += f"; best {record['best_id']}: {s['candidate_ms']:.4g} ms"
        if s.get("speedup_vs_eager"):
            line += f", {s['speedup_vs_eager']:.2f}x vs eager"
        if s.get("speedup_vs_compile"):
            line += f", {s['speedup_vs_compile']:.2f}x vs torch.compile"
        if s.get("speedup_vs_eager_policy"):     # --precision: eager run under the same policy
            line += f", {s['speedup_vs_eager_policy']:.2f}x vs eager under the precision policy"
    elif s["candidates"]:
        line += "; no correct candidate yet" if record["state"] == "running" else \
            "; no correct candidate"
    if s.get("advice") and record["state"] != "running":
        line += f". {s['advice'][0].upper()}{s['advice'][1:]}"
    return line


def to_text(record: dict) -> str:
    lines = [headline(record), best_line(record)]
    if record["summary"].get("measures"):        # the best candidate's --measure hook
        lines.append(measures_line(record["summary"]["measures"]))
    if record.get("timing_note"):
        lines.append(f"NOTE: timings are not performance figures: {record['timing_note']}")
    if record["summary"].get("error"):
        lines.append(f"error: {record['summary']['error']}")
    lines.append(f"artifacts: {record['summary']['artifacts']}")
    return "\n".join(lines)


def to_html(record: dict) -> str:
    s, best = record["summary"], record.get("best")
    parts = [f'<div style="{FONT};max-width:100%;border:1px solid #ccc;border-radius:4px;'
             f'padding:8px">',
             f'<div style="font-size:14px"><b>kforge</b> · {esc(headline(record)[8:])}</div>',
             f'<div>{esc(best_line(record))}</div>']
    if s.get("measures"):
        parts.append(f'<div>{esc(measures_line(s["measures"]))}</div>')
    if record.get("timing_note"):
        parts.append(f'<div style="{NOTE}">&#9888; timings are not performance figures: '
                     f'{esc(record["timing_note"])}</div>')
    if s.get("error"):
        parts.append(f'<div style="{NOTE}">&#9888; {esc(s["error"])}</div>')
    parts.append(candidates_table(record))
    chart = speedup_png(speedup_points(record))
    if chart:
        parts.append(f'<div><img alt="speedup per correct candidate" '
                     f'src="data:image/png;base64,{chart}" style="max-width:100%"></div>')
    if best:
        parts.append(f'<details><summary>best kernel: candidate {esc(best["id"])}</summary>'
                     f'<pre style="font-size:12px;overflow-x:auto">{esc(best["code"])}</pre>'
                     f'</details>')
    parts.append(f'<div style="color:#555">tokens {s["input_tokens"]} in / {s["output_tokens"]} '
                 f'out · ${s["cost_usd"]:.4f} · {s["elapsed_s"]} s · artifacts '
                 f'<code>{esc(s["artifacts"])}</code></div></div>')
    return "".join(parts)


def candidates_table(record: dict) -> str:
    """One row per candidate: id (★ best), kind, verdict, time, speedups, roofline, message."""
    header = ["#", "kind", "verdict", "ms", "vs eager", "vs compile", "of roofline", "message"]
    rows = []
    for a in record["history"]:
        r = a["result"]
        t, roof = r.get("timing") or {}, r.get("roofline") or {}
        colour = STATE_COLOURS.get(r["state"], "#616161")
        star = " ★" if a["id"] == record.get("best_id") else ""
        message = "" if r["state"] == "correct" else (r["message"].splitlines() or [""])[0][:90]
        cells = [esc(a["id"] + star), esc(a["kind"]),
                 f'<span style="color:{colour};font-weight:bold">{esc(r["state"])}</span>',
                 fmt(t.get("candidate_ms")), fmt(t.get("speedup_vs_eager"), ".2f", "x"),
                 fmt(t.get("speedup_vs_compile"), ".2f", "x"),
                 fmt(roof.get("fraction_of_sol"), ".1%"), esc(message)]
        rows.append("<tr>" + "".join(f'<td style="{CELL}">{c}</td>' for c in cells) + "</tr>")
    head = "".join(f'<th style="{CELL};background:#f3f3f3">{h}</th>' for h in header)
    return (f'<table style="border-collapse:collapse;margin:4px 0"><tr>{head}</tr>'
            f'{"".join(rows)}</table>')


def speedup_points(record: dict) -> tuple:
    """((id, vs eager, vs compile), ...) for the correct candidates with a real timing."""
    points = []
    for a in record["history"]:
        t = a["result"].get("timing") or {}
        if a["result"]["state"] == "correct" and t.get("real") and t.get("speedup_vs_eager"):
            points.append((a["id"], t["speedup_vs_eager"], t.get("speedup_vs_compile")))
    return tuple(points)


@lru_cache(maxsize=16)
def speedup_png(points: tuple) -> str | None:
    """The speedup chart as a base64 PNG; None without points or without matplotlib."""
    if not points:
        return None
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return None
    fig = Figure(figsize=(5.2, 2.2), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    x = range(len(points))
    ax.plot(x, [p[1] for p in points], "o-", color="#1565c0", label="vs eager")
    if any(p[2] for p in points):
        ax.plot([i for i, p in zip(x, points) if p[2]], [p[2] for p in points if p[2]], "o-",
                color="#ef6c00", label="vs torch.compile")
    ax.axhline(1.0, color="#999", linestyle="--", linewidth=1)
    ax.set_xticks(list(x), [p[0] for p in points])
    ax.set_ylabel("speedup (x)")
    ax.set_title("speedup per correct candidate", fontsize=10)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png")
    return base64.b64encode(out.getvalue()).decode()
