"""Charts as static SVG/PNG in HTML: they draw without JavaScript, in the live dashboard, in a
saved notebook and on GitHub alike. (Plotly FigureWidgets are used on top where anywidget is
installed; see dashboard.py.)
"""
from __future__ import annotations

import base64
import html
import struct
import zlib

from .html import FONT, MONO

LANE_COLOURS = {"reference": "#8e9aaf", "candidate": "#1565c0"}


def empty(text: str) -> str:
    return f'<div style="{FONT};color:#777">{html.escape(text)}</div>'


# --- correctness: where the error is --------------------------------------------------------

def error_map(emap: dict | None, width: int = 360) -> str:
    """A heat map (2-D) or bar chart (1-D) of |candidate - reference|, max-pooled."""
    if not emap or not emap.get("values"):
        return empty("no error map (the outputs matched, or the check stopped before values)")
    shape = "x".join(map(str, emap.get("shape", [])))
    if emap.get("kind") == "1d":
        return bars(emap["values"], f"max |error| per bin, output shape {shape}")
    values = emap["values"]
    top = max((max(row) for row in values if row), default=0.0) or 1.0
    pixels = [[heat(v / top) for v in row] for row in values]
    rows, cols = len(values), len(values[0]) if values else 0
    height = max(40, int(width * rows / max(cols, 1)))
    return (f'<div style="{FONT}">max |error| over the output (shape {shape}), pooled to '
            f'{rows}x{cols}; white 0, dark red {top:.3g}</div>'
            f'<img alt="error heat map" src="data:image/png;base64,{png(pixels)}" '
            f'style="width:{width}px;height:{height}px;image-rendering:pixelated;'
            f'border:1px solid #ccc">')


def heat(x: float) -> tuple[int, int, int]:
    x = min(max(x, 0.0), 1.0)
    return (255 - int(75 * x), int(255 * (1 - x)), int(255 * (1 - x)))


def png(pixels: list[list[tuple[int, int, int]]]) -> str:
    """A base64 RGB PNG, written by hand (zlib + struct): no imaging library needed."""
    height, width = len(pixels), len(pixels[0])
    raw = b"".join(b"\x00" + bytes(c for px in row for c in px) for row in pixels)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2,
                                                              0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
    return base64.b64encode(data).decode()


def bars(values: list[float], title: str, width: int = 480, height: int = 120) -> str:
    top = max(values) or 1.0
    w = width / len(values)
    rects = "".join(f'<rect x="{i * w:.1f}" y="{height - v / top * height:.1f}" '
                    f'width="{max(w - 1, 1):.1f}" height="{v / top * height:.1f}" fill="#c62828">'
                    f'<title>bin {i}: {v:.3g}</title></rect>' for i, v in enumerate(values))
    return (f'<div style="{FONT}">{html.escape(title)}; tallest {top:.3g}</div>'
            f'<svg width="{width}" height="{height}" style="border:1px solid #ccc">{rects}</svg>')


# --- profile: a timeline with a reference lane and a candidate lane -------------------------

def timeline(reference: list[dict] | None, candidate: list[dict] | None, width: int = 720,
             per_lane: int = 400) -> str:
    lanes = [("reference", reference or []), ("candidate", candidate or [])]
    if not any(events for _, events in lanes):
        return empty("no profile yet (profiles are taken for correct candidates)")
    end = max((e["start_us"] + e["duration_us"] for _, ev in lanes for e in ev), default=1.0)
    end = end or 1.0
    lane_h, label_w, top = 26, 80, 18
    parts = []
    for row, (lane, events) in enumerate(lanes):
        y = top + row * (lane_h + 8)
        parts.append(f'<text x="0" y="{y + 17}" font-size="12">{lane}</text>')
        shown = sorted(events, key=lambda e: -e["duration_us"])[:per_lane]
        for e in shown:
            x = label_w + e["start_us"] / end * (width - label_w)
            w = max(e["duration_us"] / end * (width - label_w), 0.8)
            parts.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{lane_h}" '
                         f'fill="{LANE_COLOURS[lane]}" opacity="0.85"><title>'
                         f'{html.escape(e["name"][:120])}: {e["duration_us"]:.1f} us at '
                         f'{e["start_us"]:.1f} us</title></rect>')
        total = sum(e["duration_us"] for e in events)
        parts.append(f'<text x="{width + 6}" y="{y + 17}" font-size="11">{len(events)} ops, '
                     f'{total:.0f} us</text>')
    height = top + 2 * (lane_h + 8)
    axis = f'<text x="{label_w}" y="12" font-size="11">0 us</text>' \
           f'<text x="{width - 60}" y="12" font-size="11">{end:.0f} us</text>'
    return (f'<div style="{FONT}">kernel timeline (3 profiled calls each; hover a box for its '
            f'name)</div><svg width="{width + 130}" height="{height}" style="{MONO}">'
            f'{axis}{"".join(parts)}</svg>')


# --- performance: speedup per candidate ----------------------------------------------------

def speedups(points: list[dict], width: int = 520, height: int = 200) -> str:
    """points: [{"label", "eager", "compile", "sol"}] (speedups as ratios, sol a fraction)."""
    points = [p for p in points if p.get("eager") or p.get("compile")]
    if not points:
        return empty("no timed candidate yet")
    top = max(1.2, *(v for p in points for v in (p.get("eager"), p.get("compile")) if v)) * 1.1
    left, bottom, right = 40, 24, 10
    span_x = (width - left - right) / max(len(points) - 1, 1)

    def xy(i, v):
        return left + i * span_x, (height - bottom) - v / top * (height - bottom - 10)
    parts = [f'<line x1="{left}" x2="{width - right}" y1="{xy(0, 1)[1]:.1f}" y2="{xy(0, 1)[1]:.1f}" '
             f'stroke="#999" stroke-dasharray="4 3"/>',
             f'<text x="2" y="{xy(0, 1)[1] + 4:.1f}" font-size="10">1x</text>',
             f'<text x="2" y="{xy(0, top / 1.1)[1] + 4:.1f}" font-size="10">{top / 1.1:.2g}x</text>']
    for key, colour in (("eager", "#1565c0"), ("compile", "#ef6c00")):
        series = [(i, p[key]) for i, p in enumerate(points) if p.get(key)]
        if not series:
            continue
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(i, v) for i, v in series))
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for i, v in series:
            x, y = xy(i, v)
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{colour}"><title>'
                         f'{points[i]["label"]}: {v:.2f}x vs {key}</title></circle>')
    for i, p in enumerate(points):
        x, _ = xy(i, 0)
        parts.append(f'<text x="{x - 8:.1f}" y="{height - 6}" font-size="10">{p["label"]}</text>')
    legend = (f'<span style="color:#1565c0">&#9679; vs eager</span> '
              f'<span style="color:#ef6c00">&#9679; vs torch.compile</span>')
    return (f'<div style="{FONT}">speedup per correct candidate (higher is better) {legend}</div>'
            f'<svg width="{width}" height="{height}" style="{MONO}">{"".join(parts)}</svg>')


def roofline_bars(points: list[dict], width: int = 520) -> str:
    """How close each correct candidate is to the speed of light (roofline), as a fraction."""
    points = [p for p in points if p.get("sol") is not None]
    if not points:
        return empty("no roofline position yet (needs a real timing and a known device peak)")
    rows = []
    for p in points:
        frac = min(max(p["sol"], 0.0), 1.0)
        rows.append(f'<div style="{MONO}">{html.escape(p["label"]):>6} '
                    f'<span style="display:inline-block;width:{int(frac * 300)}px;height:10px;'
                    f'background:#2e7d32"></span> {p["sol"]:.1%} of roofline '
                    f'({html.escape(p.get("bound") or "?")}-bound)</div>')
    return f'<div style="{FONT}">fraction of speed of light</div>' + "".join(rows)


def performance_points(attempts: list[dict]) -> list[dict]:
    points = []
    for a in attempts:
        r = a["result"]
        if r["state"] != "correct":
            continue
        t, roof = r.get("timing") or {}, r.get("roofline") or {}
        points.append({"label": f'{a["iteration"]}.{a["sample"]}', "eager": t.get("speedup_vs_eager"),
                       "compile": t.get("speedup_vs_compile"), "sol": roof.get("fraction_of_sol"),
                       "bound": roof.get("bound"), "real": t.get("real")})
    return points
