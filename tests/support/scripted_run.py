"""A finished session whose verdicts are written out, not measured (issue 27): speedups with
95 % intervals, a tie, a repeat of an earlier candidate's code, a noisy and a busy timing, and a
roofline fraction above 100 %. The views' tests (jsdom, JupyterLab in chromium, the fallbacks)
draw its record, so what they check never depends on this machine's timings or load."""
from __future__ import annotations

from kforge_nb.result import CORRECT, Result, Roofline, Timing
from kforge_nb.session import Session

BUSY_NOTE = "load 3.9 on 2 cores; the worker got 48 % of the wall time"
NOISE_NOTE = "the interval stayed at ±31% after 40 rounds (goal ±5%)"


def timed(speedup: float, ci, compile_=None, compile_ci=None, fraction=None, **timing) -> Result:
    roof = Roofline(fraction_of_sol=fraction, bound="memory",
                    ceiling_exceeded=bool(fraction and fraction > 1)) if fraction else Roofline()
    return Result(CORRECT, "ok", timing=Timing(
        real=True, candidate_ms=round(1.0 / speedup, 4), eager_ms=1.0, speedup_vs_eager=speedup,
        speedup_vs_eager_ci=list(ci) if ci else None, speedup_vs_compile=compile_,
        speedup_vs_compile_ci=list(compile_ci) if compile_ci else None,
        compile_ms=round(1.0 / speedup * compile_, 4) if compile_ else None, **timing),
        roofline=roof)


VERDICTS = {
    "# A": timed(1.20, (1.10, 1.30), 0.90, (0.85, 0.95), fraction=0.42),
    "# B": timed(1.25, (1.15, 1.35), fraction=1.31, busy=True, busy_note=BUSY_NOTE),
    "# C": timed(1.60, (1.50, 1.70), 1.10, (1.05, 1.15), fraction=0.7, noisy=True,
                 noise_note=NOISE_NOTE),
    "# D": timed(0.90, None),               # a timing saved without an interval
}


class Scripted:
    """An executor whose verdict for a code is looked up by its first line ("# A", ...)."""
    name = "scripted"

    def __init__(self, verdicts=None):
        self.verdicts, self.calls = verdicts or VERDICTS, []

    def evaluate(self, problem, code, target, options, folder):
        self.calls.append(code)
        return Result.from_dict(self.verdicts[code.splitlines()[0]].to_dict())

    def describe(self) -> str:
        return "scripted"


def kernel(tag: str, body: str = "") -> str:
    return f"{tag}\n{body or f'x = {tag[2:]!r}'}\n"


def scripted_session(folder, problem=None) -> Session:
    """0.1 A (1.20x), 0.2 B (1.25x: a tie with A, busy, roofline 131 %), 0.3 C (1.60x: the
    best, noisy), 0.4 a repeat of C's code (same as 0.3), 0.5 D (no interval); finished."""
    if problem is None:
        from tests.test_session_anthropic import PROBLEM as problem
    s = Session(problem, "cpp", out=folder, executor=Scripted())
    for tag in ("# A", "# B", "# C"):
        s.evaluate_code(kernel(tag))
    s.evaluate_code(kernel("# C", "x = 'C'  # the same kernel, commented"))
    s.evaluate_code(kernel("# D"))
    s.finish_reason = "scripted"
    s._finish()
    return s


def scripted_record(folder) -> dict:
    from kforge_nb.ui.report import run_record
    return run_record(scripted_session(folder))
