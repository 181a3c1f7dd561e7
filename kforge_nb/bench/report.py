"""A bench's rows and what they add up to: correctness rate, fast_p, geometric means.

`fast_p` is KernelBench's measure: the fraction of ALL problems whose best candidate is correct
and more than p times faster than eager PyTorch (fast_0 is the correctness rate). Faster means
the speedup's 95 % interval lies above p (its low end clears p; a timing saved without an
interval counts by its point), and the table says so. Timings that are not performance figures
(Triton's CPU interpreter) count for fast_0 only, and the table says so. Geometric means are
over correct rows with real timings. Speedups are written `1.42x ±6%` (kforge_nb/intervals.py);
a row timed on a busy CPU shows the candidate's own time (its blocks' low calls) and its speedups
with their intervals written out, `1.90x (1.2-3.1x)`: there the interval spans the block
medians' and the low calls' and is wide and lopsided. The "side by side" column is the best's
head-to-head with the best before it in its session, timed in the same rounds (what decided it
was best): `1.12x faster than 0.2`, `tie with 0.2 (1.02x)`, `no head-to-head with 0.2`.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import math
from dataclasses import dataclass

from ..baselines import common_mode, long_name, short_name
from ..intervals import (FASTER_NOTE, busy_text, decided, faster_than, own_ms, speedup_text,
                         spread_text, valid_ci)

FAST_P = (0.0, 1.0, 1.5, 2.0)


@dataclass
class Row:
    id: str                            # level1/19_ReLU
    state: str                         # a Result state, or bad_problem / no_candidate / error
    candidate_ms: float | None = None
    eager_ms: float | None = None
    compile_ms: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    eager_fraction_of_sol: float | None = None
    fraction_of_sol: float | None = None
    real: bool | None = None           # False: not a performance figure (interpreter)
    iterations: int = 0
    seconds: float = 0.0
    worker: str = ""
    folder: str = ""                   # the run or evaluation folder
    note: str = ""
    # --precision tf32/bf16/fp16: speedups over eager and torch.compile run under that policy
    policy: str = ""
    speedup_vs_eager_policy: float | None = None
    speedup_vs_compile_policy: float | None = None
    # 95 % intervals of the speedups ([low, high], None in rows saved before them), and what the
    # evaluator said of the timing: the interval stayed wide (noisy), the machine was busy
    speedup_vs_eager_ci: list[float] | None = None
    speedup_vs_compile_ci: list[float] | None = None
    noisy: bool = False
    busy: bool = False
    busy_note: str = ""
    # the best's head-to-head with the best before it (Timing.versus: "id", "ratio", "ci",
    # "verdict"), and its own time on a busy CPU (Timing.candidate_low_ms); None in rows saved
    # before them, or where there was no rival
    versus: dict | None = None
    candidate_low_ms: float | None = None
    # torch.compile's mode behind the compile figures (--baseline); None in older rows
    compile_mode: str | None = None

    @property
    def problem(self) -> str:
        return self.id

    @property
    def correct(self) -> bool:
        return self.state == "correct"


def row_from_dict(data: dict) -> Row:
    known = {f.name for f in dataclasses.fields(Row)}
    return Row(**{k: v for k, v in data.items() if k in known})


def row_from_result(id: str, result, seconds: float, iterations: int = 1, note: str = "") -> Row:
    t, r = result.timing, result.roofline
    if result.state != "correct":
        return Row(id, result.state, iterations=iterations, seconds=seconds,
                   worker=result.worker, folder=result.artifacts or "",
                   note=(note or result.message)[:200])
    eager_sol = (r.speed_of_light_ms / t.eager_ms) if (r.speed_of_light_ms and t.eager_ms
                                                       and t.real) else None
    return Row(id, result.state, t.candidate_ms, t.eager_ms, t.compile_ms, t.speedup_vs_eager,
               t.speedup_vs_compile, eager_sol, r.fraction_of_sol, t.real, iterations,
               seconds, result.worker, result.artifacts or "", note[:200], t.policy or "",
               t.speedup_vs_eager_policy, t.speedup_vs_compile_policy,
               speedup_vs_eager_ci=t.speedup_vs_eager_ci,
               speedup_vs_compile_ci=t.speedup_vs_compile_ci, compile_mode=t.compile_mode,
               noisy=t.noisy, busy=t.busy,
               busy_note=t.busy_note, versus=t.versus, candidate_low_ms=t.candidate_low_ms)


def geomean(values: list[float | None]) -> float | None:
    values = [v for v in values if v]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def fast_p(rows: list[Row], p: float, baseline: str = "eager") -> float | None:
    """KernelBench's fast_p over all rows; None when p > 0 and no timing against that baseline
    is real (the interpreter, or torch.compile not timed). A row counts as faster than p only
    when its speedup's 95 % interval lies above p (without an interval: its point)."""
    speed = f"speedup_vs_{baseline}"
    if not rows:
        return None
    if p > 0 and not any(r.correct and r.real and getattr(r, speed) for r in rows):
        return None
    fast = [r for r in rows if r.correct and
            (p == 0 or (r.real and faster_than(getattr(r, speed) or 0,
                                               getattr(r, f"{speed}_ci"), p)))]
    return len(fast) / len(rows)


def summary(rows: list[Row]) -> dict:
    correct = [r for r in rows if r.correct]
    timed = [r for r in correct if r.real]
    return {
        "problems": len(rows), "correct": len(correct),
        "correct_rate": len(correct) / len(rows) if rows else None,
        "fast_p": {str(p): fast_p(rows, p) for p in FAST_P},
        "fast_p_vs_compile": {str(p): fast_p(rows, p, "compile") for p in FAST_P},
        "geomean_speedup_vs_eager": geomean([r.speedup_vs_eager for r in timed]),
        "geomean_speedup_vs_compile": geomean([r.speedup_vs_compile for r in timed]),
        "geomean_fraction_of_sol": geomean([r.fraction_of_sol for r in timed]),
        "timings_real": all(r.real for r in correct) if correct else None,
    }


def f(value, spec: str) -> str:
    return format(value, spec) if value is not None else "-"


def speed_cell(value, ci, noisy: bool = False, busy: bool = False) -> str:
    """"1.42x ±6%" ("?" after it: noisy); on a busy CPU the interval written out, "1.90x
    (1.2-3.1x)"; "-" without a speedup."""
    if value is None:
        return "-"
    text = spread_text(value, ci, compact=True) if busy else speedup_text(value, ci)
    return text + ("?" if noisy else "")


def versus_cell(versus) -> str:
    """The head-to-head in a table cell: "1.12x faster than 0.2", "0.80x slower than 0.2",
    "tie with 0.2 (1.02x)", "no head-to-head with 0.2"; "-" without one."""
    if not isinstance(versus, dict) or not versus.get("id"):
        return "-"
    rival = versus["id"]
    if not decided(versus):
        return f"no head-to-head with {rival}"
    if versus["verdict"] == "tie":
        return f"tie with {rival} ({versus['ratio']:.2f}x)"
    return f"{versus['ratio']:.2f}x {versus['verdict']} than {rival}"


def sol_cell(value) -> str:
    """A fraction of the speed of light; above 100 % the ceiling is underestimated: ">100%*"."""
    if value is None:
        return "-"
    return ">100%*" if value > 1 else format(value, ".1%")


def table(rows: list[Row]) -> str:
    policy = next((r.policy for r in rows if r.speedup_vs_eager_policy), "")
    duels = any(r.versus for r in rows if r.correct)
    compiled = common_mode(rows)
    head = (f"{'problem':30} {'state':16} {'ms':>9} {'eager ms':>9} {'x eager':>18} "
            f"{'x ' + short_name(compiled):>18} {'SoL eager':>9} {'SoL':>6}"
            + (f" {'x eager(p)':>10} {'x ' + short_name(compiled) + '(p)':>12}" if policy else "")
            + (f" {'side by side':24}" if duels else ""))
    lines = [head, "-" * len(head)]
    for r in rows:
        eager = speed_cell(r.speedup_vs_eager, r.speedup_vs_eager_ci, r.noisy, r.busy)
        compile_ = speed_cell(r.speedup_vs_compile, r.speedup_vs_compile_ci, False, r.busy)
        lines.append(f"{r.id[-30:]:30} {r.state:16} {f(own_ms(r), '9.4f'):>9} "
                     f"{f(r.eager_ms, '9.4f'):>9} {eager:>18} {compile_:>18} "
                     f"{sol_cell(r.eager_fraction_of_sol):>9} {sol_cell(r.fraction_of_sol):>6}"
                     + (f" {f(r.speedup_vs_eager_policy, '10.2f')} "
                        f"{f(r.speedup_vs_compile_policy, '12.2f')}" if policy else "")
                     + (f" {versus_cell(r.versus) if r.correct else '-':24}" if duels else ""))
    lines += ["-" * len(head), *totals(rows)]
    if duels:
        lines.append("side by side: the best's head-to-head with the best before it, timed in "
                     "the same rounds (its time against the rival's; faster or slower only with "
                     "the 95 % interval off 1x and clear of a kernel's noise against itself)")
    if policy:
        lines.append(f"(p): eager and {long_name(compiled)} under the precision policy: "
                     f"{policy}")
    return "\n".join(lines)


def totals(rows: list[Row]) -> list[str]:
    s = summary(rows)
    mode = common_mode(rows)
    compiled = long_name(mode)
    fast_labels = [f"fast_p vs {name}:" for name in ("eager", compiled)]
    width = max(map(len, fast_labels)) + 1
    lines = [f"correct {s['correct']}/{s['problems']}"
             + (f" ({s['correct_rate']:.0%})" if rows else "")
             + f"; geomean speedup vs eager {f(s['geomean_speedup_vs_eager'], '.2f')}x, "
             f"vs {compiled} {f(s['geomean_speedup_vs_compile'], '.2f')}x, fraction of "
             f"speed of light {sol_cell(s['geomean_fraction_of_sol'])}",
             fast_labels[0].ljust(width) + fast_line(s["fast_p"]),
             fast_labels[1].ljust(width) + fast_line(s["fast_p_vs_compile"]),
             f"({FASTER_NOTE}, above p for fast_p; x eager, x {short_name(mode)}: the speedup "
             "± half its 95 % interval)"]
    correct = [r for r in rows if r.correct and r.real]
    if correct:
        worst = min(correct, key=lambda r: r.speedup_vs_eager or math.inf)
        slowest = min(correct, key=lambda r: r.speedup_vs_compile or math.inf)
        lines.append(f"worst vs eager: {worst.id} "
                     f"{speedup_text(worst.speedup_vs_eager, worst.speedup_vs_eager_ci)}; "
                     f"worst vs {compiled}: {slowest.id} "
                     f"{speedup_text(slowest.speedup_vs_compile, slowest.speedup_vs_compile_ci)}")
    if any(r.noisy for r in rows if r.correct):
        lines.append("?: noisy: the interval stayed wider than the evaluator's goal")
    if any((r.fraction_of_sol or 0) > 1 or (r.eager_fraction_of_sol or 0) > 1 for r in rows):
        lines.append("*: ceiling underestimated: above 100 % of the speed of light, the measured "
                     "peak is too low")
    busy = [r for r in rows if r.busy]
    if busy:
        lines.append("⚠ " + busy_text(busy[-1].busy_note, [r.id for r in busy]))
        lines.append("on a busy CPU: ms is the candidate's own time (its blocks' low calls, the "
                     "load mostly left out) and x eager, x compile their 95 % interval itself")
    if any(r.real is False for r in rows):
        lines.append("NOTE: some timings are not performance figures (Triton interpreter): "
                     "they count for correctness (fast_0) only")
    return lines


def fast_line(values: dict) -> str:
    return "  ".join(f"fast_{float(p):g} {f(v, '.0%')}" for p, v in values.items())


PLOTLY_MIME = "application/vnd.plotly.v1+json"


def speedup_figure(rows: list[Row]) -> dict | None:
    """Speedup vs eager per correct problem with a real timing, as a plotly figure (plain data:
    JupyterLab draws it with plotly's own renderer, which the `plotly` package installs: zoom,
    hover, download as PNG): a bar per problem, slowest first, on a log axis with 1x marked,
    its 95 % interval as an error bar; green where the interval lies above 1x, grey where only
    the point does, red below. None where no problem was timed."""
    timed = sorted((r for r in rows if r.correct and r.real and r.speedup_vs_eager),
                   key=lambda r: r.speedup_vs_eager)
    if not timed:
        return None
    values = [r.speedup_vs_eager for r in timed]
    bounds = [valid_ci(r.speedup_vs_eager_ci) for r in timed]
    bar = {"type": "bar", "x": [r.id for r in timed], "y": values,
           "marker": {"color": ["#2e7d32" if faster_than(r.speedup_vs_eager,
                                                         r.speedup_vs_eager_ci)
                                else "#9e9e9e" if r.speedup_vs_eager >= 1 else "#c62828"
                                for r in timed]},
           "text": [f"{r.id}: "
                    f"{speed_cell(r.speedup_vs_eager, r.speedup_vs_eager_ci, r.noisy, r.busy)}"
                    f" vs eager, {f(r.candidate_ms, '.4g')} ms" for r in timed],
           "hoverinfo": "text", "textposition": "none"}
    if any(bounds):
        bar["error_y"] = {"type": "data", "symmetric": False,
                          "array": [max(b[1] - v, 0) if b else 0 for v, b in zip(values, bounds)],
                          "arrayminus": [max(v - b[0], 0) if b else 0
                                         for v, b in zip(values, bounds)]}
    title = (f"{len(timed)} of {len(rows)} problems correct and timed; "
             + fast_line(summary(rows)["fast_p"]))
    return {"data": [bar], "layout": {
        "title": {"text": title, "font": {"size": 12}},
        "yaxis": {"type": "log", "title": {"text": "speedup vs eager (x)"}},
        "xaxis": {"tickangle": -60, "automargin": True},
        "shapes": [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 1, "y1": 1,
                    "line": {"color": "black", "width": 1}}],
        "height": 420, "margin": {"t": 40}}}


def to_csv(rows: list[Row]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, [fl.name for fl in dataclasses.fields(Row)])
    writer.writeheader()
    for row in rows:
        writer.writerow(dataclasses.asdict(row))
    return out.getvalue()
