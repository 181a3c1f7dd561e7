"""What both agents are told about the earlier attempts: each candidate's id, parent, the change
it was asked to make, its verdict, time and speedup, and whether it was kept as the best. A
search of several lineages (beam, evolve) shows a branch its own line (`on_line`).

`outcomes()` turns a session's attempts into `Outcome`s (plain data: agents never hold the
session's records). Only attempts of earlier rounds are shown: a round's samples run at once,
and a prompt must not depend on which of them finished first (a replay compares prompts).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..intervals import timing_speedup
from ..result import CORRECT

SHOWN = 24           # the most recent outcomes a prompt lists (a long search has hundreds)


@dataclass(frozen=True)
class Outcome:
    id: str
    parent: str | None
    kind: str                        # initial, fix, optimise, manual
    change: str                      # the change asked for ("" for a first version or a fix)
    source: str                      # who asked: analyst, edit, redirect, search or ""
    state: str
    message: str                     # the verdict's first line (a failure's reason)
    ms: float | None
    speedup: str                     # "1.25x ±3%" vs eager, or ""
    kept: bool                       # the best once it was judged
    best_now: bool
    vs_parent: float | None          # its speed over its parent's (>1: faster)
    same_as: str | None = None
    bound: str | None = None         # its profile's bottleneck (memory, compute), once timed
    lineage: str | None = None       # its line's first correct candidate (search.py)

    def verdict(self) -> str:
        """"correct at 10.14 ms (0.80x vs eager)", or the state and its reason."""
        if self.state == CORRECT and self.ms is not None:
            speed = f" ({self.speedup} vs eager)" if self.speedup else ""
            return f"correct at {self.ms:.4g} ms{speed}"
        return f"{self.state}: {self.message}" if self.message else self.state

    def fate(self) -> str:
        if self.same_as:
            return f"the same code as {self.same_as}"
        if self.state != CORRECT:
            return "not kept"
        relative = f"{self.vs_parent:.2f}x of {self.parent}, " if self.vs_parent else ""
        now = "; the best now" if self.best_now else ""
        return f"{relative}{'kept as the best' if self.kept else 'not kept'}{now}"

    def asked_by(self, to_analyst: bool) -> str:
        """Who asked for its change, as the agent reading it is addressed."""
        if self.source == "analyst":
            return "your advice" if to_analyst else "the analyst's advice"
        return "the search's pick" if self.source == "search" else f"a person's {self.source}"

    def origin(self, to_analyst: bool = False) -> str:
        """Where it came from: "from 0.0 on your advice 'tile it'", "a fix of 0.0"."""
        if self.kind not in ("initial", "fix", "optimise"):
            return f"judged by hand ({self.kind})"
        if self.change:
            return f"from {self.parent} on {self.asked_by(to_analyst)} '{self.change}'"
        if self.kind == "fix":
            return f"a fix of {self.parent}" if self.parent else "a fix"
        return f"from {self.parent}" if self.parent else "written from scratch"

    def line(self, to_analyst: bool = False) -> str:
        return f"- {self.id} ({self.origin(to_analyst)}): {self.verdict()}; {self.fate()}"


def source_of(attempt) -> str:
    """Who asked for its change: the analyst, a person in review mode (edit, redirect), or the
    search (the analyst's next-ranked change, another lineage's)."""
    decision = attempt.decision
    if attempt.applied is None and attempt.recommendation is None:
        return ""                    # no change: a first version, a fix, a hand edit
    if decision is not None and decision.kind in ("edit", "redirect"):
        return decision.kind
    if attempt.recommendation is None or (attempt.applied is not None and
                                          attempt.applied.title != attempt.recommendation.title):
        return "search"
    return "analyst"


def outcomes(attempts, best_of, before_iteration: int | None = None) -> list[Outcome]:
    """The attempts of rounds before `before_iteration` (all: None) as outcomes, in id order.
    `best_of(attempts)` names the best of a list (the session's standing): an attempt was kept
    where it was the best of those judged up to it."""
    shown = sorted((a for a in attempts
                    if before_iteration is None or a.iteration < before_iteration),
                   key=lambda a: (a.iteration, a.sample))
    by_id = {a.id: a for a in shown}
    best_now = best_of(shown)
    made = []
    for k, a in enumerate(shown):
        t, parent = a.result.timing, by_id.get(a.parent or "")
        correct = a.result.state == CORRECT
        vs_parent = parent.speed / a.speed if (
            correct and parent is not None and parent.result.state == CORRECT
            and a.speed not in (0, float("inf"))) else None
        change = a.applied.title if a.applied is not None else \
            a.recommendation.title if a.recommendation is not None else ""
        made.append(Outcome(
            a.id, a.parent, a.kind, change, source_of(a), a.result.state,
            (a.result.message.splitlines() or [""])[0][:120],
            t.candidate_ms if correct else None,
            timing_speedup(t, mark_noise=False) if correct and t.speedup_vs_eager else "",
            correct and best_of(shown[:k + 1]) is a, a is best_now, vs_parent, a.same_as,
            a.result.roofline.bound, a.lineage))
    return made


def on_line(found: list[Outcome], candidate: str | None) -> list[Outcome]:
    """The outcomes of the line `candidate` belongs to (its lineage, and the attempts that
    never passed): what a search's branch was tried with. No candidate: all of them."""
    me = next((o for o in found if o.id == candidate), None)
    if me is None or me.lineage is None:
        return found
    return [o for o in found if o.lineage in (me.lineage, None)]


def lines(found: list[Outcome], to_analyst: bool = False) -> list[str]:
    """The prompt's list of earlier attempts: the most recent SHOWN, one a line."""
    left_out = len(found) - SHOWN
    head = [f"- ({left_out} earlier attempts not shown)"] if left_out > 0 else []
    return head + [o.line(to_analyst) for o in found[-SHOWN:]]


def seen_again(candidate: str, found: list[Outcome]) -> list[str]:
    """Why the analyst sees `candidate` again: its children so far, none of them kept."""
    children = [o for o in found if o.parent == candidate and o.kind == "optimise"]
    if not children or any(o.kept for o in children):
        return []
    said = [f"candidate {o.id}, made from {candidate} on {o.asked_by(True)} '{o.change}', was "
            f"{o.verdict()}{f' ({o.vs_parent:.2f}x of {candidate})' if o.vs_parent else ''}, "
            "not kept" for o in children]
    return [f"{'; '.join(said)}; you are looking at {candidate} again."]


def with_outcomes(titles: list[str], found: list[Outcome]) -> list[str]:
    """Each recommendation already made, with what came of it."""
    said = []
    for title in titles:
        came = [o for o in found if o.change == title]
        said.append(f"- {title}: " + ("; ".join(f"{o.id} {o.verdict()}, {o.fate()}"
                                                for o in came) or "no candidate came of it"))
    return said


def starting_point(parent: str | None, kind: str, found: list[Outcome]) -> str:
    """Which candidate a generation starts from, and why."""
    me = next((o for o in found if o.id == parent), None)
    if kind == "initial" or me is None:
        failed = [o.id for o in found if o.state != CORRECT]
        return ("You start from scratch" + (f": the earlier attempts ({', '.join(failed)}) "
                                             "did not pass" if failed else "") + ".")
    if kind == "fix":
        return f"You start from candidate {parent}, which did not pass ({me.verdict()})."
    why = "the best so far" if me.best_now else "not the best now; the search expands it too"
    text = f"You start from candidate {parent} ({why}: {me.verdict()})."
    tried = [o for o in found if o.parent == parent and o.kind == "optimise"]
    if tried and not any(o.kept for o in tried):
        text += " Earlier changes to it were not kept: " + "; ".join(
            f"{o.id} on '{o.change}' was {o.verdict()}" for o in tried) + "."
    return text
