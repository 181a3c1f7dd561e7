"""HTML fragments shared by the dashboard and the saved report: inline styles only, no script.

Every function takes plain data (an attempt dict: {"iteration", "sample", "kind", "code",
"result": Result.to_dict()}) and returns a string that reads well on GitHub, in VS Code and in
nbviewer, where no extension and no JavaScript runs.
"""
from __future__ import annotations

import difflib
import html
import os

STATE_COLOURS = {
    "correct": "#2e7d32", "mismatch": "#ef6c00", "compile_failure": "#c62828",
    "runtime_error": "#ad1457", "rejected": "#6a1b9a", "generation_failure": "#616161",
    "unavailable": "#455a64", "running": "#1565c0",
}
FONT = "font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;font-size:13px"
MONO = "font-family:SFMono-Regular,Menlo,Consolas,monospace;font-size:12px"
TABLE = "border-collapse:collapse;margin:4px 0"
CELL = "border:1px solid #ddd;padding:2px 8px;text-align:left"
NOTE = ("background:#fff3cd;border:1px solid #e0c36b;border-left:6px solid #e0a800;"
        "padding:6px 10px;margin:4px 0;color:#5c4400")


def esc(value) -> str:
    return html.escape(str(value))


def badge(state: str, label: str | None = None) -> str:
    colour = STATE_COLOURS.get(state, "#616161")
    return (f'<span style="background:{colour};color:white;border-radius:3px;padding:1px 6px;'
            f'{MONO}">{esc(label or state)}</span>')


def note(text: str) -> str:
    return f'<div style="{NOTE}">&#9888; {esc(text)}</div>'


def table(header: list[str], rows: list[list], raw: bool = False) -> str:
    """A plain table; cells are escaped unless raw (then they are trusted HTML)."""
    head = "".join(f'<th style="{CELL};background:#f3f3f3">{esc(h)}</th>' for h in header)
    body = "".join("<tr>" + "".join(f'<td style="{CELL}">{c if raw else esc(c)}</td>'
                                    for c in row) + "</tr>" for row in rows)
    return f'<table style="{TABLE}"><tr>{head}</tr>{body}</table>'


def fmt(value, spec: str = ".4g", suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def code(text: str | None, lines: list[int] | None = None) -> str:
    """Syntax-highlighted Python (inline styles); `lines` are marked in yellow."""
    if not text:
        return f'<div style="{FONT};color:#777">(no code)</div>'
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer
    formatter = HtmlFormatter(noclasses=True, linenos="inline", hl_lines=lines or [],
                              nobackground=False, style="default",
                              prestyles=f"{MONO};line-height:1.35;margin:0")
    return (f'<div style="max-height:520px;overflow:auto;border:1px solid #ddd">'
            f'{highlight(text, PythonLexer(), formatter)}</div>')


def diff(old: str | None, new: str | None, old_label: str, new_label: str) -> str:
    """A unified diff, coloured, with a line count summary."""
    if not old or not new:
        return f'<div style="{FONT};color:#777">(nothing to compare with)</div>'
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), old_label, new_label,
                                      lineterm="", n=2))
    if not lines:
        return f'<div style="{FONT};color:#777">identical to {esc(old_label)}</div>'
    added = sum(1 for l in lines if l.startswith("+") and not l.startswith("+++"))
    removed = sum(1 for l in lines if l.startswith("-") and not l.startswith("---"))
    colours = {"+": "#e6ffec", "-": "#ffebe9", "@": "#ddf4ff"}
    body = "".join(f'<div style="background:{colours.get(l[:1], "white")};white-space:pre">'
                   f'{esc(l) or " "}</div>' for l in lines)
    return (f'<div style="{FONT}">+{added} / -{removed} lines vs {esc(old_label)}</div>'
            f'<div style="{MONO};max-height:360px;overflow:auto;border:1px solid #ddd">{body}</div>')


def error(attempt: dict | None) -> str:
    """What failed, where: the message, the offending source line marked, the compiler log."""
    if not attempt:
        return f'<div style="{FONT};color:#777">no candidate yet</div>'
    r = attempt["result"]
    if r["state"] == "correct":
        return f'<div style="{FONT}">{badge("correct")} no errors</div>'
    err = r.get("error") or {}
    parts = [f'<div style="{FONT}">{badge(r["state"])} <b>{esc(err.get("type", ""))}</b></div>',
             f'<pre style="{MONO};white-space:pre-wrap;background:#fbeaea;padding:6px">'
             f'{esc(r["message"])}</pre>']
    if r.get("rules"):
        parts.append(f'<div style="{FONT}">guardrail rules fired: {esc(", ".join(r["rules"]))}</div>')
    line = err.get("line")
    if line:
        parts.append(f'<div style="{FONT}">line {line}: <code>{esc(err.get("source_line", "").strip())}'
                     f'</code></div>')
    if attempt.get("code"):
        parts.append(code(attempt["code"], [line] if line else None))
    log = err.get("log") or err.get("traceback")
    if log:
        parts.append(f'<details><summary style="{FONT}">full log</summary><pre style="{MONO};'
                     f'white-space:pre-wrap;max-height:300px;overflow:auto">{esc(log)}</pre></details>')
    return "".join(parts)


def correctness(attempt: dict | None) -> str:
    if not attempt:
        return f'<div style="{FONT};color:#777">no candidate yet</div>'
    r = attempt["result"]
    c = r.get("correctness") or {}
    if not c.get("trials"):
        return (f'<div style="{FONT}">{badge(r["state"])} the candidate did not reach the '
                f'correctness check ({esc(r["message"].splitlines()[0][:200])})</div>')
    tol = c.get("tolerance") or {}
    rows = [["shape / dtype", f"{tuple(c.get('shape') or ())} {c.get('dtype') or ''}"],
            ["trials passed", f"{c.get('passed_trials')} of {c.get('trials')}"],
            ["max abs error", fmt(c.get("max_abs_error"), ".3g")],
            ["max rel error", fmt(c.get("max_rel_error"), ".3g")],
            ["relative error norm", fmt(c.get("rel_norm_error"), ".3g")],
            ["mismatch fraction", fmt(c.get("mismatch_fraction"), ".2%")],
            ["tolerance", f"atol {tol.get('atol')}, rtol {tol.get('rtol')}, "
                          f"policy {tol.get('policy')}" if tol else "-"]]
    if c.get("failed_check"):
        rows.append(["failed check", c["failed_check"]])
    out = [f'<div style="{FONT}">{badge(r["state"])} {esc(r["message"][:300])}</div>',
           table(["", ""], rows)]
    if c.get("worst"):
        out.append(f'<div style="{FONT}">worst positions</div>')
        out.append(table(["index", "got", "expected"],
                         [[str(w["index"]), fmt(w["got"], ".6g"), fmt(w["expected"], ".6g")]
                          for w in c["worst"]]))
    return "".join(out)


def top_kernels(events: list[dict], limit: int = 10) -> list[list]:
    """[name, calls, total us, mean us] rows, slowest first."""
    totals: dict[str, list[float]] = {}
    for e in events or []:
        totals.setdefault(e["name"], []).append(float(e["duration_us"]))
    rows = sorted(totals.items(), key=lambda kv: -sum(kv[1]))[:limit]
    return [[name[:80], len(d), f"{sum(d):.1f}", f"{sum(d) / len(d):.1f}"] for name, d in rows]


def trace_link(path: str | None, label: str) -> str:
    if not path or not os.path.exists(path):
        return ""
    try:
        href = os.path.relpath(path)
    except ValueError:
        href = path
    return (f'<a href="{esc(href)}" download>{esc(label)}</a> '
            f'<span style="{MONO};color:#555">{esc(path)}</span>')


def profile_tables(attempt: dict | None) -> str:
    if not attempt or not (attempt["result"].get("profile") or {}).get("candidate_events"):
        return f'<div style="{FONT};color:#777">profiles are taken for correct candidates only</div>'
    p = attempt["result"]["profile"]
    parts = []
    for lane, key in (("candidate", "candidate_events"), ("reference (eager)", "reference_events")):
        parts.append(f'<div style="{FONT}"><b>top kernels: {lane}</b></div>')
        parts.append(table(["kernel", "calls", "total us", "mean us"], top_kernels(p.get(key))))
    links = [trace_link(p.get("trace"), "candidate trace"),
             trace_link(p.get("reference_trace"), "reference trace")]
    links = [l for l in links if l]
    if links:
        parts.append(f'<div style="{FONT}">Chrome traces (open in https://ui.perfetto.dev or '
                     f'chrome://tracing):<br>{"<br>".join(links)}</div>')
    return "".join(parts)


def iterations(attempts: list[dict], best: tuple | None = None) -> str:
    """One row per candidate: verdict, time, speedups, roofline, the decision that led to it."""
    rows = []
    for a in attempts:
        r = a["result"]
        t, roof = r.get("timing") or {}, r.get("roofline") or {}
        star = " &#9733;" if best and (a["iteration"], a["sample"]) == best else ""
        rows.append([f'{a["iteration"]}.{a["sample"]}{star}', esc(a.get("kind", "")),
                     badge(r["state"]), fmt(t.get("candidate_ms"), ".4g"),
                     fmt(t.get("speedup_vs_eager"), ".2f", "x"),
                     fmt(t.get("speedup_vs_compile"), ".2f", "x"),
                     fmt(roof.get("fraction_of_sol"), ".1%"),
                     esc(a.get("decision") or "") + (": " + esc(a["recommendation"][:60])
                                                     if a.get("recommendation") else ""),
                     esc(r["message"].splitlines()[0][:90]) if r["state"] != "correct" else ""])
    return table(["#", "kind", "verdict", "ms", "vs eager", "vs compile", "of roofline",
                  "from", "message"], rows, raw=True)


def recommendation(rec: dict | None) -> str:
    if not rec:
        return (f'<div style="{FONT};color:#777">no recommendation yet: the analysis agent '
                f'speaks once a candidate is correct</div>')
    gain = f'<div style="{FONT}">expected gain: {esc(rec["expected_gain"])}</div>' \
        if rec.get("expected_gain") else ""
    return (f'<div style="{FONT}"><b>{esc(rec.get("title", ""))}</b></div>'
            f'<div style="{FONT};white-space:pre-wrap;border-left:3px solid #1565c0;'
            f'padding:4px 8px;margin:4px 0">{esc(rec.get("text", ""))}</div>{gain}')
