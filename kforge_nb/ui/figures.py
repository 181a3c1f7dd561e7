"""Interactive plotly FigureWidgets for the dashboard, built on request only.

A FigureWidget carries plotly.js (~5 MB) in its widget state, so a dashboard that always held
one would put megabytes into every saved notebook. The dashboard draws static SVG by default
(charts.py) and builds these when the user asks for zoom and pan. They need plotly and
anywidget; `available()` says why not when they are missing.
"""
from __future__ import annotations

LANES = {"reference": "#8e9aaf", "candidate": "#1565c0"}


def available() -> str | None:
    """None when FigureWidgets can be built, else what to install."""
    try:
        import anywidget  # noqa: F401
        import plotly  # noqa: F401
    except ImportError as err:
        return f"interactive charts need plotly and anywidget ({err.name} is missing): " \
               f"pip install plotly anywidget"
    return None


def fresh(fig=None):
    """A new FigureWidget, or `fig` emptied for redrawing in place (one widget, one plotly.js)."""
    import plotly.graph_objects as go
    if fig is None:
        return go.FigureWidget()
    fig.data = []
    fig.layout.shapes = []
    return fig


def timeline(reference: list[dict] | None, candidate: list[dict] | None, title: str = "",
             fig=None):
    """Kernel events as horizontal bars on two lanes; zoom to see single kernels."""
    fig = fresh(fig)
    for lane, events in (("reference", reference or []), ("candidate", candidate or [])):
        fig.add_bar(name=lane, orientation="h", y=[lane] * len(events),
                    x=[e["duration_us"] for e in events], base=[e["start_us"] for e in events],
                    marker_color=LANES[lane], hovertext=[e["name"] for e in events],
                    hovertemplate="%{hovertext}<br>%{x:.1f} us at %{base:.1f} us<extra></extra>")
    fig.update_layout(title=title or "kernel timeline", barmode="overlay", height=260,
                      xaxis_title="time (us)", margin=dict(l=90, r=20, t=40, b=40))
    return fig


def speedups(points: list[dict], fig=None):
    """Speedup vs eager and vs torch.compile per correct candidate (charts.performance_points)."""
    fig = fresh(fig)
    labels = [p["label"] for p in points]
    for key, colour in (("eager", "#1565c0"), ("compile", "#ef6c00")):
        if any(p.get(key) for p in points):
            fig.add_scatter(x=labels, y=[p.get(key) for p in points], mode="lines+markers",
                            name=f"vs {key}", line_color=colour)
    fig.add_hline(y=1.0, line_dash="dash", line_color="#999")
    fig.update_layout(title="speedup per correct candidate", height=260,
                      xaxis_title="candidate", yaxis_title="speedup (x)",
                      margin=dict(l=60, r=20, t=40, b=40))
    return fig
