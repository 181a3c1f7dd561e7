"""Views of a bench: a tqdm bar in a terminal, a progress widget and a plot in a notebook.

Both show done/total with an ETA, the problems under way, and a line per finished problem;
the notebook's ends with the table (and a PNG of the speedups for viewers without scripts) and a
plotly chart of the speedups (one bar per problem, log scale: zoom, hover, download).
"""
from __future__ import annotations

import base64
import html
import sys
import threading
import time

from ..baselines import short_name
from ..bench.report import PLOTLY_MIME, Row, fast_line, speedup_figure, summary, table
from ..intervals import faster_than, own_ms, shown_speedup, valid_ci, versus_text
from ..bench.runner import Progress


def row_line(row: Row) -> str:
    """"level1/19_ReLU: correct 1.42x ±6% eager, 1.10x ±5% compile, 1.12x faster than 0.2 side
    by side (...) (12 s)"; on a busy CPU the best's own time and its head-to-head first, then
    the speedups with their intervals written out."""
    speed = (f" {shown_speedup(row)} eager"
             + (f", {shown_speedup(row, 'compile', mark_noise=False)} "
                f"{short_name(row.compile_mode)}"
                if row.speedup_vs_compile else "")
             if row.correct and row.real and row.speedup_vs_eager else "")
    versus = f", {versus_text(row.versus, named=True)}" \
        if row.correct and isinstance(row.versus, dict) and row.versus.get("id") else ""
    if row.correct and row.real and row.busy and own_ms(row) is not None:
        own = "own time " if row.candidate_low_ms else ""
        speed = f" {own}{own_ms(row):.4g} ms{versus}," + speed
    else:
        speed += versus
    where = f" on {row.worker}" if row.worker else ""
    busy = " BUSY while timing" if row.busy and row.correct else ""
    return f"{row.id}: {row.state}{speed}{busy} ({row.seconds:.0f} s{where})"


class TerminalBar(Progress):
    """tqdm on stderr: stdout stays clean for the table or --json."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.bar = None
        self.correct = 0

    def started(self, total, done, bench):
        from tqdm import tqdm
        print(f"kforge bench: {total} problems on {bench.target}, {bench.mode}; evaluated by "
              f"{bench.executor.describe()}\n  folder: {bench.store.folder}"
              + (f" (resuming: {done} finished earlier)" if done else ""), file=self.stream)
        self.correct = sum(r.correct for r in bench.rows())
        self.bar = tqdm(total=total, initial=done, file=self.stream, unit="problem",
                        dynamic_ncols=True, smoothing=0.1)
        self.bar.set_postfix_str(f"correct {self.correct}")

    def finished_row(self, row):
        self.correct += row.correct
        self.bar.write(row_line(row), file=self.stream)
        self.bar.set_postfix_str(f"correct {self.correct}")
        self.bar.update(1)

    def ended(self, rows):
        if self.bar is not None:
            self.bar.close()


class NotebookView(Progress):
    """In a notebook. With a person at the frontend: an ipywidgets bar with an ETA, the
    problems under way and the finished rows, updated from the bench's threads. Headless
    (nbclient, papermill): a line per finished problem. Either way the end is one output, the
    table and the speedup plot as HTML with a text fallback, which replaces the widget: a saved
    notebook keeps no widget (reopened without its kernel, one reads "model not found")."""

    def __init__(self, live: bool):
        self.live = live
        self.display_id = f"kforge-bench-{id(self)}"
        self.plot_id = f"{self.display_id}-plot"
        self.lines: list[str] = []
        self.running: set[str] = set()
        self.lock = threading.Lock()
        self.begun_at = time.monotonic()
        self.done_now = 0
        self.total = self.value = 0
        self.head = ""
        if live:
            import ipywidgets as w
            self.bar = w.IntProgress(min=0, description="kforge bench", bar_style="info",
                                     layout=w.Layout(width="60%"))
            self.label, self.log = w.HTML(), w.HTML()
            self.box = w.VBox([w.HBox([self.bar, self.label]), self.log])

    def show(self) -> None:
        """Put the widget in the cell: call from the cell's own thread, before the bench."""
        if self.live:
            from IPython.display import display
            bundle = self.box._repr_mimebundle_()      # the widget, with a one-line fallback
            bundle["text/plain"] = "kforge bench (live view; the table replaces it at the end)"
            display(bundle, raw=True, display_id=self.display_id)
            # where the speedup chart goes at the end (drawn by plotly, zoom and hover)
            display({"text/plain": ""}, raw=True, display_id=self.plot_id)

    def started(self, total, done, bench):
        self.total, self.value = total, done
        self.begun_at = time.monotonic()
        self.head = (f"kforge bench: {total} problems on {bench.target}, {bench.mode}; "
                     f"evaluated by {bench.executor.describe()}; folder {bench.store.folder}"
                     + (f" (resuming: {done} finished earlier)" if done else ""))
        if self.live:
            self.bar.max, self.bar.value = total, done
            self._refresh()
        else:
            print(self.head, flush=True)

    def begun(self, id):
        with self.lock:
            self.running.add(id)
        self._refresh()

    def finished_row(self, row):
        with self.lock:
            self.running.discard(row.id)
            self.lines.append(row_line(row))
            self.done_now += 1
            self.value += 1
        if not self.live:
            print(f"[{self.value}/{self.total}{self.eta()}] {self.lines[-1]}", flush=True)
        self._refresh()

    def eta(self) -> str:
        left = self.total - self.value
        if not self.done_now or not left:
            return ""
        seconds = (time.monotonic() - self.begun_at) / self.done_now * left
        return f", about {seconds / 60:.0f} min left" if seconds >= 90 else \
            f", about {seconds:.0f} s left"

    def _refresh(self):
        if not self.live:
            return
        with self.lock:
            self.bar.value = self.value
            running = ", ".join(sorted(self.running)[:4])
            self.label.value = (f"{self.value}/{self.total}{self.eta()}"
                                + (f" &middot; now: {html.escape(running)}" if running else ""))
            self.log.value = (f"<div style='font-size:small'>{html.escape(self.head)}</div>"
                              "<pre style='max-height:14em;overflow:auto'>"
                              + html.escape("\n".join(self.lines[-200:])) + "</pre>")

    def ended(self, rows):
        from IPython.display import display, update_display
        text = table(rows)
        png = speedup_png(rows)
        image = (f"<img alt='speedup vs eager per problem' src='data:image/png;base64,"
                 f"{base64.b64encode(png).decode()}'>" if png else "")
        bundle = {"text/plain": text,
                  "text/html": f"<pre>{html.escape(text)}</pre>{image}"}
        figure = speedup_figure(rows)
        plot = {PLOTLY_MIME: figure, "text/plain": "speedup vs eager per problem (an "
                "interactive plotly chart in JupyterLab; the table above has the numbers)"} \
            if figure else {"text/plain": ""}
        if self.live:
            update_display(bundle, display_id=self.display_id, raw=True)
            update_display(plot, display_id=self.plot_id, raw=True)
        else:
            display(bundle, raw=True)
            if figure:
                display(plot, raw=True)


def speedup_png(rows: list[Row]) -> bytes | None:
    """Speedup vs eager per correct problem with a real timing (log scale, 1x marked, the 95 %
    interval as an error bar; green: the interval lies above 1x), as PNG bytes (a Figure of its
    own: the notebook's pyplot backend is left alone)."""
    timed = [r for r in rows if r.correct and r.real and r.speedup_vs_eager]
    if not timed:
        return None
    import io
    from matplotlib.figure import Figure
    timed.sort(key=lambda r: r.speedup_vs_eager)
    figure = Figure(figsize=(min(12, 2 + 0.3 * len(timed)), 3.6))
    axes = figure.subplots()
    values = [r.speedup_vs_eager for r in timed]
    bounds = [valid_ci(r.speedup_vs_eager_ci) for r in timed]
    errors = [[max(v - b[0], 0) if b else 0 for v, b in zip(values, bounds)],
              [max(b[1] - v, 0) if b else 0 for v, b in zip(values, bounds)]]
    axes.bar(range(len(timed)), values, yerr=errors if any(bounds) else None, capsize=2,
             color=["tab:green" if faster_than(r.speedup_vs_eager, r.speedup_vs_eager_ci)
                    else "tab:grey" if r.speedup_vs_eager >= 1 else "tab:red" for r in timed])
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.set_yscale("log")
    axes.set_ylabel("speedup vs eager")
    axes.set_xticks(range(len(timed)), [r.id.split("/")[-1][:18] for r in timed],
                    rotation=70, fontsize=7)
    axes.set_title(f"{len(timed)} of {len(rows)} problems correct and timed; "
                   + fast_line(summary(rows)["fast_p"]), fontsize=9)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    return buffer.getvalue()
