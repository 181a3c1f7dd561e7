"""The run record where no kforge view runs: GitHub, nbviewer, VS Code without the widget, an
untrusted notebook, a terminal.

The HTML survives sanitising: inline styles, no inline SVG (JupyterLab strips it from untrusted
HTML and leaves its text behind); the speedup chart is a PNG in a data URI, drawn with matplotlib
when it is installed (the `notebook` extra), else the table alone carries the numbers. A script
after it lets plotly draw the same chart in its place (zoom, hover) where a viewer runs scripts;
a sanitiser drops the script and the PNG stays.
The text is a few lines, then the candidates tree (parent -> child, indented) where it says more
than the order of the candidates: a beam or evolve search, a steered one, or one that branched.

The candidates tree has one layout: `tree_layout` works out its rows (order, depth, greyed,
lineage label) into the record's "tree", and every view draws those rows as they are: the
notebook view (labextension/src/tree.ts, with buttons and tooltips) and, here, the text and the
script-free HTML (`tree_text`, `tree_html`: the same words per row, `tree_marks` and
`tree_timing`). A view that runs no script cannot borrow the TypeScript's drawing, so the words
of a row are written twice: in TypeScript as tags for the live view, here for the fallbacks.
"""
from __future__ import annotations

import base64
import html
import io
import json
import os
from functools import lru_cache

from ..agents.history import reason
from ..baselines import common_mode, long_name, short_name
from ..intervals import (busy_text, decided, interval_text, own_ms, own_time_text,
                         roofline_text, shown_speedup, timing_speedup, valid_ci, versus_tag,
                         versus_text)
from ..result import measures_line

STATE_COLOURS = {
    "correct": "#2e7d32", "mismatch": "#ef6c00", "compile_failure": "#c62828",
    "runtime_error": "#ad1457", "rejected": "#6a1b9a", "generation_failure": "#616161",
    "unavailable": "#455a64",
}
FONT = "font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;font-size:13px"
CELL = "border:1px solid #ddd;padding:2px 8px;text-align:left"
NOTE = "background:#fff3cd;border-left:6px solid #e0a800;padding:4px 8px;margin:4px 0;color:#5c4400"
MAX_TREE_LINES = 40     # of the text fallback's tree; the HTML shows every candidate
MAX_INDENT = 16         # deeper nodes are drawn at this depth (a long greedy chain stays narrow)


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
    """The run in a line: the best's time and speedups, and its head-to-head with the best of
    its time; on a busy CPU its own time and that head-to-head first, then the ratio to eager
    with its interval written out (the best's timing from the history, the summary's where a
    record has no history entry for it)."""
    s = record["summary"]
    line = f"{s['candidates']} candidates over {s['iterations']} iterations"
    if record.get("best_id") and s.get("candidate_ms") is not None:
        best = next((a for a in record.get("history") or [] if a["id"] == record["best_id"]),
                    None)
        t = {**s, **((best or {}).get("result", {}).get("timing") or {})}
        versus = versus_text(t["versus"], named=True) if t.get("versus") else ""
        if t.get("busy"):
            line += f"; best {record['best_id']}: {own_time_text(t)}"
            line += f", {versus}" if versus else ""
            if t.get("speedup_vs_eager"):
                line += f", {shown_speedup(t)} vs eager"
            if t.get("speedup_vs_compile"):
                line += (f", {shown_speedup(t, 'compile', mark_noise=False)} vs "
                         f"{long_name(t.get('compile_mode'))}")
        else:
            line += f"; best {record['best_id']}: {t['candidate_ms']:.4g} ms"
            if t.get("speedup_vs_eager"):
                line += f", {timing_speedup(t)} vs eager"
            if t.get("speedup_vs_compile"):
                line += (f", {timing_speedup(t, 'compile', mark_noise=False)} vs "
                         f"{long_name(t.get('compile_mode'))}")
            line += f", {versus}" if versus else ""
        if s.get("speedup_vs_eager_policy"):     # --precision: eager run under the same policy
            line += f", {s['speedup_vs_eager_policy']:.2f}x vs eager under the precision policy"
    elif s["candidates"]:
        line += "; no correct candidate yet" if record["state"] == "running" else \
            "; no correct candidate"
    if s.get("advice") and record["state"] != "running":
        line += f". {s['advice'][0].upper()}{s['advice'][1:]}"
    return line


def busy_line(record: dict) -> str | None:
    """The busy banner's text, where a timing of the run was taken on a busy machine."""
    busy = record.get("busy")
    return busy_text(busy.get("note") or "", busy.get("ids") or ()) if busy else None


def to_text(record: dict) -> str:
    lines = [headline(record), best_line(record)]
    if busy_line(record):
        lines.append(f"⚠ {busy_line(record)}")
    if record.get("confirmation"):
        lines.append(record["confirmation"])
    if record["summary"].get("measures"):        # the best candidate's --measure hook
        lines.append(measures_line(record["summary"]["measures"]))
    if record.get("timing_note"):
        lines.append(f"NOTE: timings are not performance figures: {record['timing_note']}")
    if record["summary"].get("error"):
        lines.append(f"error: {record['summary']['error']}")
    lines.append(f"artifacts: {record['summary']['artifacts']}")
    lines += tree_text(record)
    return "\n".join(lines)


def to_html(record: dict) -> str:
    s, best = record["summary"], record.get("best")
    parts = [f'<div style="{FONT};max-width:100%;border:1px solid #ccc;border-radius:4px;'
             f'padding:8px">',
             f'<div style="font-size:14px"><b>kforge</b> · {esc(headline(record)[8:])}</div>',
             f'<div>{esc(best_line(record))}</div>']
    if busy_line(record):
        parts.append(f'<div style="{NOTE}" data-role="busy">&#9888; {esc(busy_line(record))}'
                     '</div>')
    if record.get("confirmation"):
        parts.append(f'<div>{esc(record["confirmation"])}</div>')
    if s.get("measures"):
        parts.append(f'<div>{esc(measures_line(s["measures"]))}</div>')
    if record.get("timing_note"):
        parts.append(f'<div style="{NOTE}">&#9888; timings are not performance figures: '
                     f'{esc(record["timing_note"])}</div>')
    if s.get("error"):
        parts.append(f'<div style="{NOTE}">&#9888; {esc(s["error"])}</div>')
    parts.append(candidates_table(record))
    parts.append(tree_html(record))
    points = speedup_points(record)
    compiled = long_name(common_mode(a["result"].get("timing") for a in record["history"]))
    chart = speedup_png(points, compiled)
    if chart:
        parts.append(plotly_library() + '<div><img alt="speedup per correct candidate" '
                     f'src="data:image/png;base64,{chart}" style="max-width:100%">'
                     + chart_caption() + '</div>' + plotly_script(speedup_figure(points, compiled)))
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
    compiled = short_name(common_mode(a["result"].get("timing") for a in record["history"]))
    header = ["#", "kind", "verdict", "ms", "side by side", "vs eager", f"vs {compiled}",
              "of roofline", "message"]
    rows = []
    for a in record["history"]:
        r = a["result"]
        t, roof = r.get("timing") or {}, r.get("roofline") or {}
        colour = STATE_COLOURS.get(r["state"], "#616161")
        star = " ★" if a["id"] == record.get("best_id") else ""
        cells = [esc(a["id"] + star), esc(a["kind"]),
                 f'<span style="color:{colour};font-weight:bold">{esc(r["state"])}</span>',
                 ms_cell(t), versus_cell(a), speedup_cell(t, "eager"),
                 speedup_cell(t, "compile"),
                 esc(roofline_text(roof.get("fraction_of_sol"), roof.get("ceiling_exceeded"))),
                 message_cell(a)]
        rows.append("<tr>" + "".join(f'<td style="{CELL}">{c}</td>' for c in cells) + "</tr>")
    head = "".join(f'<th style="{CELL};background:#f3f3f3">{h}</th>' for h in header)
    return (f'<table style="border-collapse:collapse;margin:4px 0"><tr>{head}</tr>'
            f'{"".join(rows)}</table>')


SHORT_MESSAGE = 90      # a message cell's first words; the whole reason is right below them


def message_cell(a: dict) -> str:
    """A candidate's "same as" / "tie with" and its verdict's reason: the reason whole where it
    is short, else its first words with the whole of it right below (a <details> in the cell,
    which sanitisers keep): a refusal's reason is never cut."""
    r = a["result"]
    said = "" if r["state"] == "correct" else reason(r["state"], r.get("message") or "")
    tag = same_or_tie(a)
    if len(said) <= SHORT_MESSAGE:
        return esc("; ".join(m for m in (tag, said) if m))
    head = "; ".join(m for m in (tag, said[:SHORT_MESSAGE].rstrip() + "…") if m)
    return (f'<details data-role="reason"><summary>{esc(head)}</summary>'
            f'<div style="white-space:pre-wrap;max-width:60em">{esc(said)}</div></details>')


def ms_cell(t: dict) -> str:
    """The candidate's time; on a busy CPU its own time (its blocks' low calls), said so."""
    if t.get("busy") and t.get("candidate_low_ms"):
        return (f'<span title="{esc(own_time_text(t))}">{fmt(own_ms(t))} own time</span> '
                "(busy)")
    return fmt(t.get("candidate_ms")) + (" (busy)" if t.get("busy") else "")


def versus_cell(a: dict) -> str:
    """The head-to-head with the best of its time, in words; "" where there was none (the
    first candidate, a repeat, a record from before head-to-heads)."""
    versus = (a["result"].get("timing") or {}).get("versus")
    if a.get("same_as") or a["result"]["state"] != "correct" or not versus:
        return ""
    return f'<span data-role="versus">{esc(versus_text(versus, named=True))}</span>'


def speedup_cell(t: dict, baseline: str) -> str:
    """A speedup with its interval (the exact bounds as the cell's title; on a busy CPU
    written out: "5.00x (2-20x)"), marked noisy."""
    text = esc(shown_speedup(t, baseline, mark_noise=False, compact=True))
    title = interval_text(t.get(f"speedup_vs_{baseline}_ci"))
    if title:
        text = f'<span title="{esc(title)}">{text}</span>'
    if t.get("noisy") and baseline == "eager" and t.get(f"speedup_vs_{baseline}"):
        text += f' <span title="{esc(t.get("noise_note") or "noisy")}">(noisy)</span>'
    return text


def same_or_tie(a: dict) -> str:
    """"same as 0.0" (its code repeats 0.0's: not judged again) or "tie with 0.0" (side by
    side, where its head-to-head says so)."""
    if a.get("same_as"):
        return f"same as {a['same_as']}"
    if a.get("tie_with"):
        versus = (a["result"].get("timing") or {}).get("versus")
        side = decided(versus) and versus.get("id") == a["tie_with"]
        return f"tie with {a['tie_with']}" + (" side by side" if side else "")
    return ""


def id_key(attempt_id) -> tuple:
    """"iteration.sample" in numeric order (1.10 after 1.9); anything else after, by text."""
    try:
        iteration, sample = str(attempt_id).split(".")
        return (0, int(iteration), int(sample), "")
    except ValueError:
        return (1, 0, 0, str(attempt_id))


def tree_rows(record: dict) -> list[tuple[int, dict, bool]]:
    """The candidates as the search's tree, depth first: (depth, candidate, greyed). Roots are
    the candidates without a parent in the history (all of them in a record saved before the
    search existed), children come in id order; greyed: pruned, or under a pruned one."""
    history = record.get("history") or []
    by_id = {a["id"]: a for a in history}
    children: dict[str, list[dict]] = {}
    roots = []
    for a in history:
        parent = a.get("parent")
        if parent in by_id and parent != a["id"]:
            children.setdefault(parent, []).append(a)
        else:
            roots.append(a)
    pruned = set((record.get("search") or {}).get("pruned") or ())
    rows: list[tuple[int, dict, bool]] = []
    seen: set[str] = set()
    # a cycle (a hand-edited run folder) reaches no root: its candidates are shown as roots
    for start in sorted(roots, key=lambda a: id_key(a["id"])) + \
            sorted(history, key=lambda a: id_key(a["id"])):
        stack = [(start, 0, False)]
        while stack:
            a, depth, greyed = stack.pop()
            if a["id"] in seen:
                continue
            seen.add(a["id"])
            greyed = greyed or a["id"] in pruned
            rows.append((depth, a, greyed))
            kids = sorted(children.get(a["id"], []), key=lambda c: id_key(c["id"]))
            stack += [(c, depth + 1, greyed) for c in reversed(kids)]   # popped in id order
    return rows


def lineage_labels(record: dict) -> dict[str, str]:
    """A short label per lineage (A, B, ... in the order of the ids that start them)."""
    lineages = sorted({a["lineage"] for a in record.get("history") or [] if a.get("lineage")},
                      key=id_key)
    return {lineage: letters(k) for k, lineage in enumerate(lineages)}


def tree_layout(record: dict) -> list[dict]:
    """The tree as every view draws it, in the record (run_record's "tree"): one row per
    candidate, depth first, with its depth, whether it is greyed and its lineage's label.
    tree.ts and tree_lines draw these rows as they are: the tree's shape is worked out here
    only."""
    labels = lineage_labels(record)
    return [{"id": a["id"], "depth": depth, "greyed": greyed,
             "lineage": labels.get(a.get("lineage"))} for depth, a, greyed in tree_rows(record)]


def tree_lines(record: dict) -> list[tuple[dict, dict]]:
    """The record's tree rows (those tree.ts draws) with their candidates: (row, candidate)."""
    by_id = {a["id"]: a for a in record.get("history") or []}
    rows = record["tree"] if "tree" in record else tree_layout(record)   # an older record
    return [(row, by_id[row["id"]]) for row in rows if row["id"] in by_id]


def letters(k: int) -> str:
    """0 -> A, 25 -> Z, 26 -> AA, ..."""
    out = ""
    k += 1
    while k:
        k, r = divmod(k - 1, 26)
        out = chr(65 + r) + out
    return out


def tree_title(record: dict) -> str:
    """"candidates tree (beam, width 2; pinned 1.0; pruned 0.1)"."""
    search = record.get("search") or {}
    facts = [f"{search['strategy']}, width {search.get('width', 1)}"] if search.get("strategy") \
        else []
    facts += [f"{what} {', '.join(search[what])}" for what in ("pinned", "pruned", "finished")
              if search.get(what)]
    return "candidates tree" + (f" ({'; '.join(facts)})" if facts else "")


def tree_marks(record: dict, row: dict, a: dict) -> list[str]:
    """What a tree row says beside the verdict: lineage, parent, best, pinned, pruned, finished."""
    search = record.get("search") or {}
    greyed = row.get("greyed")
    marks = [f"[{row['lineage']}]"] if row.get("lineage") else []
    if a.get("parent"):
        marks.append(f"<- {a['parent']}")
    if a["id"] == record.get("best_id"):
        marks.append("★ best")
    if same_or_tie(a):
        marks.append(same_or_tie(a))
    marks += [what for what in ("pinned", "pruned", "finished")
              if a["id"] in (search.get(what) or ())]
    if greyed and a["id"] not in (search.get("pruned") or ()):
        marks.append("(under a pruned candidate)")
    return marks


def tree_timing(a: dict) -> str:
    """" 0.69 ms 1.45x ±5%, faster than 0.1 side by side"; on a busy CPU its own time and its
    head-to-head first: " 0.45 ms own time, faster than 0.2 side by side, 1.90x (1.2-3.1x)
    (busy)". A tie's head-to-head is the row's "tie with" mark."""
    t = a["result"].get("timing") or {}
    if a["result"]["state"] != "correct" or t.get("candidate_ms") is None:
        return ""
    versus = t.get("versus")
    tag = "" if a.get("same_as") or (versus or {}).get("verdict") == "tie" and \
        a.get("tie_with") == versus.get("id") else versus_tag(versus)
    speedup = shown_speedup(t, compact=True) if t.get("speedup_vs_eager") else ""
    if t.get("busy"):
        own = " own time" if t.get("candidate_low_ms") else ""
        return f" {own_ms(t):.4g} ms{own}" + "".join(f", {p}" for p in (tag, speedup) if p) + \
            " (busy)"
    return f" {t['candidate_ms']:.4g} ms" + (f" {speedup}" if speedup else "") + \
        (f", {tag}" if tag else "")


def tree_text(record: dict) -> list[str]:
    """The tree as indented lines: `  1.2 correct 0.21 ms 1.10x [A] <- 0.1`; none for a plain
    greedy climb (one chain, nothing pinned or pruned: the text stays a few lines) or a record
    from before the search."""
    rows = tree_lines(record)
    search = record.get("search")
    chain = [row["depth"] for row, _ in rows] == list(range(len(rows)))
    if not rows or not search or (search.get("strategy") == "greedy" and chain
                                  and not search.get("pinned") and not search.get("pruned")):
        return []
    lines = [tree_title(record) + ":"]
    for row, a in rows[:MAX_TREE_LINES]:
        marks = " ".join(tree_marks(record, row, a))
        lines.append(f"{'  ' * min(row['depth'], MAX_INDENT)}{a['id']} {a['result']['state']}"
                     f"{tree_timing(a)}{'  ' + marks if marks else ''}")
    if len(rows) > MAX_TREE_LINES:
        lines.append(f"… {len(rows) - MAX_TREE_LINES} more candidates (artifacts: "
                     f"{record['summary']['artifacts']})")
    return lines


def tree_html(record: dict) -> str:
    """The tree as indented rows (inline styles only); the pruned and their descendants grey."""
    rows = tree_lines(record)
    if not rows:
        return ""
    out = []
    for row, a in rows:
        depth, greyed = row["depth"], row.get("greyed")
        state = a["result"]["state"]
        colour = "#9e9e9e" if greyed else STATE_COLOURS.get(state, "#616161")
        grey = ";color:#9e9e9e" if greyed else ""
        applied = f' <span style="color:#777">{esc(a["applied"][:60])}</span>' \
            if a.get("applied") else ""
        out.append(f'<div style="padding-left:{min(depth, MAX_INDENT) * 16}px{grey}">'
                   f'{"└ " if depth else ""}{esc(a["id"])} '
                   f'<span style="color:{colour};font-weight:bold">{esc(state)}</span>'
                   f'{esc(tree_timing(a))} {esc(" ".join(tree_marks(record, row, a)))}'
                   f'{applied}</div>')
    return (f'<details open style="margin:4px 0"><summary>{esc(tree_title(record))}</summary>'
            f'<div style="font-family:monospace;font-size:12px">{"".join(out)}</div></details>')


def speedup_points(record: dict) -> tuple:
    """((id, vs eager, vs compile, eager interval, compile interval), ...) for the correct
    candidates with a real timing; an interval is (low, high) or None."""
    points = []
    for a in record["history"]:
        t = a["result"].get("timing") or {}
        if a["result"]["state"] == "correct" and t.get("real") and t.get("speedup_vs_eager"):
            points.append((a["id"], t["speedup_vs_eager"], t.get("speedup_vs_compile"),
                           valid_ci(t.get("speedup_vs_eager_ci")),
                           valid_ci(t.get("speedup_vs_compile_ci"))))
    return tuple(points)


def speedup_figure(points: tuple, compiled: str = "torch.compile") -> dict:
    """The PNG's chart as a plotly figure (plain data): speedup vs eager and, where it was
    timed, vs `compiled` (the baseline's name) per correct candidate, its 95 % interval as an
    error bar."""
    data = []
    for index, name, colour in ((1, "vs eager", "#1565c0"), (2, f"vs {compiled}", "#ef6c00")):
        shown = [p for p in points if p[index]]
        if not shown:
            continue
        bounds = [p[index + 2] for p in shown]
        below, above = error_bars([p[index] for p in shown], bounds)
        data.append({"type": "scatter", "mode": "lines+markers", "name": name,
                     "x": [p[0] for p in shown], "y": [p[index] for p in shown],
                     "line": {"color": colour}, "marker": {"color": colour},
                     "error_y": {"type": "data", "symmetric": False, "array": above,
                                 "arrayminus": below, "visible": any(bounds)}})
    return {"data": data, "layout": {
        "height": 260, "margin": {"l": 48, "r": 12, "t": 8, "b": 36},
        "xaxis": {"type": "category", "title": {"text": "candidate"}},
        "yaxis": {"title": {"text": "speedup (x)"}, "rangemode": "tozero"},
        "shapes": [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 1, "y1": 1,
                    "line": {"dash": "dash", "color": "#999", "width": 1}}]}}


# Where a viewer runs the HTML's scripts (VS Code, nbviewer, an exported page, a trusted
# notebook without kforge's extension), plotly draws the chart in the PNG's place: the page's
# own plotly.js, else the copy embedded in the report (KFORGE_PLOTLY_JS=inline), else the one
# plotly's Python package names on its CDN; where no script runs, or none loads (offline, with
# the CDN), the PNG stays.
PLOTLY_DRAW = """<script>(function(){var box=document.currentScript.previousElementSibling;
var figure=%s;function draw(){box.innerHTML='';window.Plotly.newPlot(box,figure.data,
figure.layout,{responsive:true,displaylogo:false});}if(window.Plotly){draw();return;}
var s=document.createElement('script');s.src=%s;s.onload=draw;document.head.appendChild(s);
})();</script>"""
# Where plotly.js comes from: "cdn" (the default: a few KB a report, the chart needs the
# network) or "inline" (the plotly.js plotly's Python package ships, embedded once in each
# report: the chart draws offline, at ~4.8 MB a report, and a notebook keeps every report it
# shows, so it is asked for, never the default)
PLOTLY_JS = "KFORGE_PLOTLY_JS"


def plotly_inline() -> bool:
    return os.environ.get(PLOTLY_JS, "").strip().lower() == "inline"


@lru_cache(maxsize=1)
def plotly_js() -> str | None:
    """plotly.js as plotly's Python package ships it; None without plotly, or where it could
    not sit inside a <script> ("</script" in it would end the element early)."""
    try:
        from plotly.offline import get_plotlyjs
    except ImportError:
        return None
    source = get_plotlyjs()
    return None if "</script" in source.lower() else source


def plotly_library() -> str:
    """Under KFORGE_PLOTLY_JS=inline, plotly.js itself, for the chart after it (a page that
    has plotly.js already keeps its own); "" otherwise."""
    source = plotly_js() if plotly_inline() else None
    return f"<script>if(!window.Plotly){{{source}\n}}</script>" if source else ""


def chart_caption() -> str:
    """Under the PNG (plotly draws over both): where the interactive chart comes from, and
    what offline does to it; "" without plotly."""
    if plotly_js() is None:
        return ""
    size = f"{len(plotly_js()) / 1e6:.1f} MB"
    said = (f"plotly.js ({size}) is embedded in this report ({PLOTLY_JS}=inline): where the "
            "page runs scripts it draws this chart with zoom and hover, offline too."
            if plotly_inline() else
            "Where this page runs scripts and is online, plotly.js (from its CDN) draws this "
            "chart with zoom and hover; offline this picture stays. A run with "
            f"{PLOTLY_JS}=inline embeds plotly.js ({size}) in each report so that it draws "
            "offline.")
    return f'<div style="color:#555;font-size:11px">{esc(said)}</div>'


def plotly_script(figure: dict) -> str:
    """The script that turns the element before it into the figure; "" without plotly."""
    try:
        from plotly.offline import get_plotlyjs_version
    except ImportError:
        return ""
    source = f"https://cdn.plot.ly/plotly-{get_plotlyjs_version()}.min.js"
    # inside a <script>: "</" would close it
    return PLOTLY_DRAW % (json.dumps(figure).replace("</", "<\\/"), json.dumps(source))


def error_bars(values, bounds):
    """matplotlib's yerr (two rows: below, above) for points with (low, high) or None."""
    return [[max(v - b[0], 0) if b else 0 for v, b in zip(values, bounds)],
            [max(b[1] - v, 0) if b else 0 for v, b in zip(values, bounds)]]


@lru_cache(maxsize=16)
def speedup_png(points: tuple, compiled: str = "torch.compile") -> str | None:
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
    eager = [p[1] for p in points]
    ax.errorbar(list(x), eager, yerr=error_bars(eager, [p[3] for p in points]), fmt="o-",
                color="#1565c0", capsize=3, label="vs eager")
    timed = [(i, p) for i, p in zip(x, points) if p[2]]
    if timed:
        compile_ = [p[2] for _, p in timed]
        ax.errorbar([i for i, _ in timed], compile_,
                    yerr=error_bars(compile_, [p[4] for _, p in timed]), fmt="o-",
                    color="#ef6c00", capsize=3, label=f"vs {compiled}")
    ax.axhline(1.0, color="#999", linestyle="--", linewidth=1)
    ax.set_xticks(list(x), [p[0] for p in points])
    ax.set_ylabel("speedup (x)")
    ax.set_title("speedup per correct candidate (bars: 95 % interval)"
                 if any(p[3] or p[4] for p in points) else "speedup per correct candidate",
                 fontsize=10)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png")
    return base64.b64encode(out.getvalue()).decode()
