"""Pictures of the best candidate's profile for the analysis agent, as a profiler shows them:
its kernel timeline beside the reference's, and where it sits under the device's roofline.

PNG bytes drawn on matplotlib's Agg canvas, 800x300 at 80 dpi, and deterministic: the same
Result gives the same bytes (matplotlib's default style and bundled font, no software or time
stamp in the file), so a person sees exactly what the model saw. No profile or roofline data:
no picture of it; no matplotlib: no pictures at all (the session says so once).
"""
from __future__ import annotations

import base64
import io
import threading
from dataclasses import dataclass

from ..intervals import own_ms
from ..result import Result

SIZE, DPI = (10.0, 3.75), 80          # 800 x 300 pixels
MAX_EVENTS = 400                      # per lane, the longest kept
PALETTE = ("#1565c0", "#ef6c00", "#2e7d32", "#6a1b9a", "#c62828", "#00838f")
OTHER = "#9e9e9e"
CAPTIONS = {
    "timeline": "the kernel timeline of one forward (reference lane above, candidate below; "
                "a colour per kernel)",
    "roofline": "the roofline (the candidate's and eager's achieved points under the "
                "device's roof)",
}
_lock = threading.Lock()              # a style context changes matplotlib's global settings


@dataclass(frozen=True)
class Picture:
    name: str                         # "timeline" or "roofline"
    png: bytes

    @property
    def file_name(self) -> str:
        return f"analysis-{self.name}.png"

    @property
    def caption(self) -> str:
        return CAPTIONS[self.name]

    def block(self) -> dict:
        """An image content block in the Anthropic Messages form (the OpenAI-compatible
        provider converts it to an image_url part)."""
        return {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                            "data": base64.b64encode(self.png).decode()}}


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def pictures(result: Result) -> list[Picture]:
    """The pictures this verdict has the data for: timeline, roofline, either or none."""
    if not available():
        return []
    found = []
    for name, draw in (("timeline", timeline_png), ("roofline", roofline_png)):
        try:
            png = draw(result)
        except Exception:       # odd data (a NaN, an event without a name): the text says it all
            png = None
        if png:
            found.append(Picture(name, png))
    return found


def user_content(text: str, found: list[Picture], files: bool = False):
    """A user message's content: the text alone (a plain string, as before pictures) or the
    pictures then the text; with `files`, each picture named by its file instead of its bytes
    (what the prompt artifact keeps)."""
    if not found:
        return text
    images = [{"type": "image", "file": p.file_name} if files else p.block() for p in found]
    return [*images, {"type": "text", "text": text}]


def timeline_png(result: Result) -> bytes | None:
    profile = result.profile or {}
    lanes = [("reference", profile.get("reference_events") or []),
             ("candidate", profile.get("candidate_events") or [])]
    if not lanes[1][1]:
        return None
    totals: dict[str, float] = {}
    for _, events in lanes:
        for e in events:
            totals[e["name"]] = totals.get(e["name"], 0.0) + float(e["duration_us"])
    top = sorted(totals, key=lambda n: (-totals[n], n))[:len(PALETTE)]
    colour = {name: PALETTE[i] for i, name in enumerate(top)}

    def draw(fig):
        from matplotlib.patches import Patch
        ax = fig.add_axes((0.12, 0.16, 0.55, 0.72))
        for row, (_, events) in enumerate(lanes):
            kept = sorted(events, key=lambda e: (-e["duration_us"], e["name"]))[:MAX_EVENTS]
            if not kept:
                continue
            t0 = min(float(e["start_us"]) for e in kept)
            ax.broken_barh([(float(e["start_us"]) - t0, float(e["duration_us"])) for e in kept],
                           (1 - row - 0.35, 0.7),
                           facecolors=[colour.get(e["name"], OTHER) for e in kept],
                           edgecolor="white", linewidth=0.4)
        ax.set_yticks([1, 0], [f"{label}\n({len(events)} events)" for label, events in lanes])
        ax.set_ylim(-0.6, 1.6)
        ax.set_xlim(left=0)
        ax.set_xlabel("microseconds from the first event")
        ax.set_title("kernel timeline: one profiled forward per lane", fontsize=10)
        handles = [Patch(color=colour[n], label=shorten(n)) for n in top]
        fig.legend(handles=handles, loc="center left", bbox_to_anchor=(0.69, 0.52),
                   fontsize=8, frameon=False, title="kernels (by total time)")
    return render(draw)


def roofline_png(result: Result) -> bytes | None:
    r, t = result.roofline, result.timing
    if not (r.min_bytes and r.peak_bandwidth and t.candidate_ms):
        return None
    # the candidate at the time its roofline fraction was computed at (intervals.own_ms)
    mine = "candidate (own time)" if own_ms(t) != t.candidate_ms else "candidate"
    points = [(label, ms, c) for label, ms, c in ((mine, own_ms(t), PALETTE[0]),
                                                  ("eager", t.eager_ms, PALETTE[1])) if ms]

    def draw(fig):
        ax = fig.add_axes((0.12, 0.16, 0.55, 0.72))
        if r.flops and r.peak_flops:             # the classic roofline, log-log
            intensity, ridge = r.flops / r.min_bytes, r.peak_flops / r.peak_bandwidth
            low, high = min(intensity, ridge) / 10, max(intensity, ridge) * 10
            ax.loglog([low, ridge, high], [r.peak_bandwidth * low, r.peak_flops, r.peak_flops],
                      color="#424242", linewidth=2, label="roof")
            roof = min(r.peak_flops, r.peak_bandwidth * intensity)
            for label, ms, c in points:
                achieved = r.flops / (ms * 1e-3)
                ax.plot([intensity], [achieved], "o", color=c, markersize=8,
                        label=f"{label}: {achieved / 1e9:.3g} GFLOP/s ({achieved / roof:.1%} "
                              "of the roof)")
            ax.set_xlabel("arithmetic intensity (FLOP per byte)")
            ax.set_ylabel("FLOP/s")
            title = f"roofline: {r.bound or 'unknown'}-bound"
        else:                                    # no FLOPs counted: bandwidth against its roof
            ax.axvline(r.peak_bandwidth / 1e9, color="#424242", linewidth=2,
                       label=f"roof: {r.peak_bandwidth / 1e9:.3g} GB/s")
            for i, (label, ms, c) in enumerate(points):
                achieved = r.min_bytes / (ms * 1e-3)
                share = achieved / r.peak_bandwidth
                ax.plot([achieved / 1e9], [i], "o", color=c, markersize=8,
                        label=f"{label}: {achieved / 1e9:.3g} GB/s ({share:.1%} of the roof)")
            ax.set_xscale("log")
            ax.set_yticks(range(len(points)), [p[0] for p in points])
            ax.set_ylim(-0.6, len(points) - 0.4)
            ax.set_xlabel("achieved bandwidth, GB/s (minimum bytes moved / time)")
            title = "roofline: memory traffic only (no FLOPs counted)"
        ax.set_title(f"{title}; {r.device or t.device}", fontsize=10)
        fig.legend(loc="center left", bbox_to_anchor=(0.69, 0.52), fontsize=8, frameon=False)
    return render(draw)


def shorten(name: str, width: int = 44) -> str:
    return name if len(name) <= width else name[:width - 1] + "…"


def render(draw) -> bytes:
    import matplotlib.style
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    with _lock, matplotlib.style.context("default"):
        fig = Figure(figsize=SIZE, dpi=DPI)
        FigureCanvasAgg(fig)
        draw(fig)
        out = io.BytesIO()
        fig.savefig(out, format="png", dpi=DPI, metadata={"Software": None})
    return out.getvalue()
