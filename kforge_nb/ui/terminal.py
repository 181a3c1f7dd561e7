"""The CLI's views of a session: progress lines on stderr, and `--review` decisions at a prompt."""
from __future__ import annotations

import sys

from ..agents.history import reason
from ..intervals import (busy_text, decided, own_ms, roofline_text, shown_speedup,
                         timing_speedup, versus_text)
from ..session.confirm import sentence as confirm_sentence
from ..session.decisions import ACCEPT, EDIT, REDIRECT, SKIP, STOP, Decision
from ..session.events import Event


class Progress:
    """One line per event that matters, on stderr (stdout stays clean for --json)."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr

    def __call__(self, event: Event) -> None:
        d, i = event.data, event.iteration
        line = None
        if event.kind == "notice":
            line = f"note: {d['text']}"
        elif event.kind == "started":
            line = (f"kforge run: {d['problem']} on {d['target']} ({d['device']}), provider "
                    f"{d['provider']}, {d['iterations']} iterations x {d['samples']} samples")
            if d.get("search", "greedy") != "greedy":
                line += f", {d['search']} search over {d['width']} branches"
            if d.get("timing_note"):
                line += f"\n  timings: {d['timing_note']}"
        elif event.kind == "iteration_started":
            line = f"[{i}] {d['phase']} pass: {d['kind']}"
        elif event.kind == "evaluated":
            r = d["result"]
            t = r["timing"]
            standing = standing_text(d, t)
            marks = ": ".join(m for m in ("best" if d["best"] else "", standing) if m)
            line = f"[{i}.{d['sample']}] {r['state']}{speed_text(r)}" + \
                (f" ({marks})" if marks else "")
            if t.get("busy") and not d.get("same_as"):
                line += f"\n  ⚠ {busy_text(t.get('busy_note') or '')}"
            if t.get("noisy") and t.get("noise_note") and not d.get("same_as"):
                line += f"\n  noisy: {t['noise_note']}"
            if d.get("parent") and d.get("kind") == "optimise":
                line += f" (from {d['parent']})"
            if r["state"] != "correct":          # the reason whole, a refusal's every line
                line += f": {reason(r['state'], r['message'])}"
        elif event.kind == "candidate_generated" and answered(d.get("notes")):
            line = f"[{i}.{d['sample']}] agent: {answered(d['notes'])}"
        elif event.kind == "evaluation_step":
            line = f"  [{d['id']}] {d['text']}"
        elif event.kind == "retry":
            line = (f"retry: {d['service']} attempt {d['attempt']} of {d['attempts']} failed "
                    f"({d['reason']}); trying again in {d['wait_s']:.1f} s")
        elif event.kind == "recommendation":
            line = f"[{i}] recommendation for {d['parent']}: {d['title']}" if d.get("parent") \
                else f"[{i}] recommendation: {d['title']}"
        elif event.kind == "decision":
            line = f"[{i}] decision: {d['kind']}" + (f" ({d['text'][:80]})" if d["text"] else "")
        elif event.kind == "duel":
            line = f"[{i}] timed side by side to decide: {d['text']}; best is {d['best']}"
        elif event.kind == "confirming":
            line = (f"[final] timing {', '.join(d['finalists'])} again, each beside the best")
        elif event.kind == "confirmed":
            line = f"[final] {confirm_sentence(d)}"
        elif event.kind == "finished":
            line = f"finished: {d['reason']}; artifacts in {d['artifacts']}"
            if d.get("advice"):
                line += f"\n{d['advice']}"
        if line:
            print(line, file=self.stream, flush=True)


def speed_text(r: dict) -> str:
    """", 0.8 ms, 1.25x ±8% vs eager" for a correct candidate; on a busy CPU it leads with its
    own time and its head-to-head, then the ratio to eager with its interval written out:
    ", own time 0.55 ms, 0.80x, slower than 0.2 side by side (...), 5.00x (95 % interval
    2-20x) vs eager"; and a roofline above 100 %, flagged."""
    t = r["timing"]
    if r["state"] != "correct":
        return ""
    speed = ""
    if t.get("candidate_ms") and t.get("busy") and t.get("real", True):
        speed = f", own time {own_ms(t):.4g} ms"
        if t.get("versus"):
            speed += f", {versus_text(t['versus'], named=True)}"
        if t.get("speedup_vs_eager"):
            speed += f", {shown_speedup(t)} vs eager"
    elif t.get("candidate_ms") and t.get("speedup_vs_eager"):
        speed = f", {t['candidate_ms']:.4g} ms, {timing_speedup(t)} vs eager"
    roof = r.get("roofline") or {}
    if roof.get("fraction_of_sol") is not None and \
            (roof["fraction_of_sol"] > 1 or roof.get("ceiling_exceeded")):
        speed += f", roofline {roofline_text(roof['fraction_of_sol'], True)}"
    return speed


def standing_text(d: dict, t: dict) -> str:
    """Where an evaluated candidate stands against the best of its time, said with the
    head-to-head that decided it: "same as 0.3: not judged again", "tie with 0.0 side by side
    at 1.02x (...): ...; 0.0 stays best", "not kept: 0.80x, slower than 0.0 side by side
    (...)", "1.21x faster than 0.0 side by side (...)"; "" where there is nothing to say. (On
    a busy CPU the speed part has said the head-to-head already.)"""
    if d.get("same_as"):
        return f"same as {d['same_as']}: not judged again"
    versus = t.get("versus") or {}
    said = bool(t.get("busy")) and bool(versus)
    tie = d.get("tie_with")
    if tie:
        if decided(versus) and versus.get("id") == tie:
            return (f"tie with {tie} side by side" if said else versus_text(versus, named=True)) \
                + f"; {tie} stays best"
        if decided(versus):           # siblings: each beside the same rival, not each other
            return (f"tie with {tie}: each was timed beside {versus['id']}, not beside each "
                    f"other; {tie} stays best")
        return f"tie with {tie}: the intervals overlap, {tie} stays best"
    if said:
        return f"not kept: slower than {versus['id']} side by side" \
            if versus.get("verdict") == "slower" else ""
    if not versus:
        return ""
    if versus.get("verdict") == "slower":
        return f"not kept: {versus_text(versus, named=True)}"
    return versus_text(versus, named=True)


def answered(notes: str | None) -> str:
    """What an agent said it did with the words it was given (the builtin agent's "applied:",
    "already so:", "not applied:" phrases); "" where it said nothing of them."""
    said = [p for p in (notes or "").split("; ")
            if p.startswith(("applied:", "already so:", "not applied:"))]
    return "; ".join(said)


class TerminalPolicy:
    """`--review`: show each recommendation and ask what to do with it."""

    def __init__(self, read=input, stream=None):
        self.read, self.stream = read, stream or sys.stderr

    def decide(self, recommendation) -> Decision:
        print(f"\nRecommendation: {recommendation.title}\n{recommendation.text}\n"
              f"Expected gain: {recommendation.expected_gain or 'n/a'}", file=self.stream)
        while True:
            try:
                answer = self.read("[a]ccept, [e]dit, [r]edirect, [s]kip, [q]uit? ").strip().lower()
            except EOFError:
                return Decision(STOP)
            if answer in ("", "a", "accept"):
                return Decision(ACCEPT)
            if answer in ("s", "skip"):
                return Decision(SKIP)
            if answer in ("q", "quit", "stop"):
                return Decision(STOP)
            if answer in ("e", "edit", "r", "redirect"):
                text = self.read("your text: ").strip()
                if text:
                    return Decision(EDIT if answer.startswith("e") else REDIRECT, text)
