"""Finished sessions whose verdicts are written out, not measured. `scripted_session` (issue
27): speedups with 95 % intervals, a tie, a repeat of an earlier candidate's code, a noisy and a
busy timing, and a roofline fraction above 100 %. `duel_session` (issue 35): head-to-heads with
the best of their time (`Timing.versus`: faster, slower, a tie, void), and busy timings with the
candidate's own time (`candidate_low_ms`) and a wide vs-eager interval. The views' tests (jsdom,
JupyterLab in chromium, the fallbacks, the terminal) draw their records, so what they check
never depends on this machine's timings or load."""
from __future__ import annotations

from kforge_nb.result import CORRECT, Result, Roofline, Timing
from kforge_nb.session import Session
from kforge_nb.session.finish import STOPPED, Finish

BUSY_NOTE = "load 3.9 on 2 cores; the worker got 48 % of the wall time"
NOISE_NOTE = "the interval stayed at ±31% after 40 rounds (goal ±5%)"


def timed(speedup: float, ci, compile_=None, compile_ci=None, fraction=None, **timing) -> Result:
    roof = Roofline(fraction_of_sol=fraction, bound="memory",
                    ceiling_exceeded=bool(fraction and fraction > 1)) if fraction else Roofline()
    fields = dict(
        real=True, candidate_ms=round(1.0 / speedup, 4), eager_ms=1.0, speedup_vs_eager=speedup,
        speedup_vs_eager_ci=list(ci) if ci else None, speedup_vs_compile=compile_,
        speedup_vs_compile_ci=list(compile_ci) if compile_ci else None,
        compile_ms=round(1.0 / speedup * compile_, 4) if compile_ else None)
    return Result(CORRECT, "ok", timing=Timing(**{**fields, **timing}), roofline=roof)


VERDICTS = {
    "# A": timed(1.20, (1.10, 1.30), 0.90, (0.85, 0.95), fraction=0.42),
    "# B": timed(1.25, (1.15, 1.35), fraction=1.31, busy=True, busy_note=BUSY_NOTE),
    "# C": timed(1.60, (1.50, 1.70), 1.10, (1.05, 1.15), fraction=0.7, noisy=True,
                 noise_note=NOISE_NOTE),
    "# D": timed(0.90, None),               # a timing saved without an interval
}


LOAD_NOTE = "load 5.2 on 2 cores; eager's own low calls ranged 0.31-3.4 ms across the rounds"


def versus(rival: str, ratio: float, ci, verdict: str) -> dict:
    """A head-to-head as the evaluator writes it (evaluator/parent/figures.py versus)."""
    return {"id": rival, "ratio": ratio, "ci": list(ci), "noise": 0.03, "verdict": verdict,
            "stat": "p20 of each block", "rounds": 14, "rival_ms": 0.5, "candidate_ms": 0.5}


DUELS = {
    "# P": timed(1.20, (1.10, 1.30)),                       # the first: no rival
    "# Q": timed(1.45, (1.38, 1.52), versus=versus("0.1", 1.21, (1.15, 1.27), "faster")),
    # busy: eager swung tenfold, so vs eager says 5x over a wide interval, but beside the best
    # in the same rounds it is slower: not kept
    "# R": timed(5.0, (2.0, 20.0), candidate_ms=0.9, candidate_low_ms=0.55, busy=True,
                 busy_note=LOAD_NOTE, versus=versus("0.2", 0.80, (0.75, 0.86), "slower")),
    "# S": timed(1.48, (1.40, 1.56), versus=versus("0.2", 1.02, (0.97, 1.08), "tie")),
    # busy and faster than the best side by side: the new best, shown by its own time
    "# T": timed(1.9, (1.2, 3.1), candidate_ms=0.62, candidate_low_ms=0.45, busy=True,
                 busy_note=LOAD_NOTE, versus=versus("0.2", 1.12, (1.07, 1.18), "faster")),
    "# V": timed(1.10, (1.0, 1.2), versus={"id": "0.5", "verdict": "void",
                                            "why": "the rival did not build: g++ exited 1"}),
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
    s._finish(Finish(STOPPED, "scripted"))
    return s


def scripted_record(folder) -> dict:
    from kforge_nb.ui.report import run_record
    return run_record(scripted_session(folder))


def duel_session(folder, problem=None) -> Session:
    """Head-to-heads (issue 35): 0.1 P (1.20x, no rival); 0.2 Q (1.21x faster than 0.1 side by
    side: best); 0.3 R (busy, own time 0.55 ms, 5.00x eager over 2-20x, but slower than 0.2
    side by side: not kept); 0.4 S (a tie with 0.2 side by side); 0.5 T (busy, own time 0.45 ms,
    1.12x faster than 0.2 side by side: the best); 0.6 V (no head-to-head: its rival did not
    build); finished."""
    if problem is None:
        from tests.test_session_anthropic import PROBLEM as problem
    s = Session(problem, "cpp", out=folder, executor=Scripted(DUELS))
    for tag in DUELS:
        s.evaluate_code(kernel(tag))
    s._finish(Finish(STOPPED, "scripted"))
    return s
