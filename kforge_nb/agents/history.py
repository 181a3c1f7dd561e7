"""What both agents are told about the earlier attempts: each candidate's id, parent, the change
it was asked to make, its verdict (a refusal's reason whole), time and speedup, and whether it
was kept as the best and why: by how much it was faster or slower than the best of its time
when the two were timed side by side (`Timing.versus`), a tie, or a refusal. A search of
several lineages (beam, evolve) shows a branch its own line (`on_line`).

`outcomes()` turns a session's attempts into `Outcome`s (plain data: agents never hold the
session's records). Only attempts of earlier rounds are shown: a round's samples run at once,
and a prompt must not depend on which of them finished first (a replay compares prompts).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..intervals import timing_speedup, valid_ci
from ..result import CORRECT, REJECTED, RUNTIME_ERROR

SHOWN = 24           # the most recent outcomes a prompt lists (a long search has hundreds)
REFERRED = 3         # the most earlier candidates whose code a generation request carries
ESTIMATE_RULES = ("faster-than-hardware",)   # refusals an estimate made, not the output


def reason(state: str, message: str) -> str:
    """A verdict's reason as the prompts and the views tell it, never cut: a refusal's whole
    message (its lines joined), another failure's first line."""
    lines = [line.strip() for line in (message or "").splitlines() if line.strip()]
    if not lines:
        return ""
    return " ".join(lines) if state == REJECTED else lines[0]


def refused_by_estimate_or_time(state: str, rules, error: dict | None) -> bool:
    """A verdict that an estimate (rule `faster-than-hardware`) or a clock (a timeout) made,
    not the candidate's output: the one a model may ask to have judged again."""
    return (state == REJECTED and any(r in ESTIMATE_RULES for r in rules or ())) or \
        (state == RUNTIME_ERROR and (error or {}).get("type") == "timeout")


def percent(share: float, unit: str = " %") -> str:
    """0.12 as "12 %", 0.004 as "0.4 %"."""
    return (f"{share * 100:.1f}" if abs(share) < 0.0095 else f"{share * 100:.0f}") + unit


def versus_text(versus: dict | None) -> str:
    """The head-to-head with the best of its time (`Timing.versus`), in words:
    "12 % slower than 0.0 timed side by side (95 % interval 8-15 %)",
    "a tie with 0.0 timed side by side (within ±3 %, the noise of a kernel timed against
    itself)", "1.21x faster than 0.0 timed side by side (95 % interval 1.15-1.27x)"; "" where
    there is none. Every phrase ends "timed side by side (...)": a replay leaves the whole of
    it out (providers/recording.py, without_standing)."""
    if not isinstance(versus, dict) or not versus.get("id") or not versus.get("ratio"):
        return ""
    rival, ratio, ci = versus["id"], float(versus["ratio"]), valid_ci(versus.get("ci"))
    ratios = f"95 % interval {ci[0]:.3g}-{ci[1]:.3g}x" if ci else ""
    if versus.get("verdict") == "tie":
        noise = versus.get("noise")
        band = f"within ±{percent(float(noise))}, the noise of a kernel timed against itself" \
            if noise else ratios or "no interval"
        return f"a tie with {rival} timed side by side ({band})"
    if ratio < 1:                       # the rival's time / this one's: this one is slower
        slower = 1 / ratio - 1
        if ci and ci[1] <= 1:
            low, high = percent(1 / ci[1] - 1, unit=""), percent(1 / ci[0] - 1)
            band = f"95 % interval {low}-{high}"
        else:
            band = ratios or "no interval"
        return f"{percent(slower)} slower than {rival} timed side by side ({band})"
    return f"{ratio:.3g}x faster than {rival} timed side by side ({ratios or 'no interval'})"


@dataclass(frozen=True)
class Outcome:
    id: str
    parent: str | None
    kind: str                        # initial, fix, optimise, manual
    change: str                      # the change asked for ("" for a first version or a fix)
    source: str                      # who asked: analyst, edit, redirect, search or ""
    state: str
    message: str                     # a failure's reason, whole (history.reason)
    ms: float | None
    speedup: str                     # "1.25x ±3%" vs eager, or ""
    kept: bool                       # the best once it was judged
    best_now: bool
    vs_parent: float | None          # its speed over its parent's (>1: faster)
    same_as: str | None = None
    bound: str | None = None         # its profile's bottleneck (memory, compute), once timed
    lineage: str | None = None       # its line's first correct candidate (search.py)
    versus: dict | None = field(default=None, hash=False)   # its head-to-head with the best of
    #                                  its time (Timing.versus)
    refused: str = ""                # "estimate" (an estimate or a timeout decided: it may be
    #                                  judged again, asked), "rule" (another refusal) or ""
    code: str | None = field(default=None, compare=False, repr=False)   # for a request that
    #                                  names it (a re-apply, another lineage's change)

    def verdict(self) -> str:
        """"correct at 10.14 ms (0.80x vs eager)", or the state and its reason."""
        if self.state == CORRECT and self.ms is not None:
            speed = f" ({self.speedup} vs eager)" if self.speedup else ""
            return f"correct at {self.ms:.4g} ms{speed}"
        return f"{self.state}: {self.message}" if self.message else self.state

    def standing(self) -> str:
        """"kept as the best" or "not kept", and why: the head-to-head with the best of its
        time ("not kept: 12 % slower than 0.0 timed side by side (...)", "not kept: a tie
        with 0.0 ..."), or a refusal."""
        if self.state != CORRECT:
            return "not kept: refused" if self.state == REJECTED else "not kept"
        said = versus_text(self.versus)
        return ("kept as the best" if self.kept else "not kept") + (f": {said}" if said else "")

    def fate(self) -> str:
        if self.same_as:
            return f"the same code as {self.same_as}"
        if self.state != CORRECT:
            return self.standing()
        relative = f"{self.vs_parent:.2f}x of {self.parent}, " if self.vs_parent else ""
        now = "; the best now" if self.best_now else ""
        return f"{relative}{self.standing()}{now}"

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
        versus = getattr(t, "versus", None) or {}
        vs_parent = versus["ratio"] if (       # timed side by side with its parent
            correct and parent is not None and versus.get("id") == parent.id
            and versus.get("ratio")) else parent.speed / a.speed if (
            correct and parent is not None and parent.result.state == CORRECT
            and a.speed not in (0, float("inf"))) else None
        change = a.applied.title if a.applied is not None else \
            a.recommendation.title if a.recommendation is not None else ""
        refused = "estimate" if refused_by_estimate_or_time(
            a.result.state, a.result.rules, a.result.error) else \
            "rule" if a.result.state == REJECTED else ""
        made.append(Outcome(
            a.id, a.parent, a.kind, change, source_of(a), a.result.state,
            reason(a.result.state, a.result.message),
            t.candidate_ms if correct else None,
            timing_speedup(t, mark_noise=False) if correct and t.speedup_vs_eager else "",
            correct and best_of(shown[:k + 1]) is a, a is best_now, vs_parent, a.same_as,
            a.result.roofline.bound, a.lineage,
            getattr(t, "versus", None) if correct and not a.same_as else None, refused,
            a.code))
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
            f"{o.standing()}" for o in children]
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
            f"{o.id} on '{o.change}' was {o.verdict()}"
            + (f", {versus_text(o.versus)}" if versus_text(o.versus) else "")
            for o in tried) + "."
    return text


# a request that names an earlier candidate to re-apply or judge again: "candidate 1.0",
# "candidates 1.0 and 1.2", "re-apply 1.0", "judge 1.0 again"
NAMING = r"(?:\bcandidates?|\bre-?apply(?:ing)?|\bapply(?:ing)? again|\bre-?judg(?:e|ing)|" \
         r"\bjudge)\s+(?:(?:\d+\.\d+)(?:\s*,\s*|\s+and\s+|\s+or\s+))*"


def named(text: str, candidate: str) -> bool:
    """Whether `text` names candidate `candidate` ("candidate 1.0", "re-apply 1.0")."""
    return bool(re.search(NAMING + re.escape(candidate) + r"(?![\d])", text or "", re.I))


def referred(texts, found: list[Outcome], but: str | None = None) -> list[tuple[str, str]]:
    """(id, code) of the earlier candidates a request names (an analyst's "re-apply candidate
    1.1", another lineage's change "it made candidate 1.1 faster"), its own parent `but`
    aside: the request carries their code."""
    text = "\n".join(t for t in texts if t)
    return [(o.id, o.code) for o in found
            if o.code and o.id != but and named(text, o.id)][:REFERRED]


def may_be_judged_again(found: list[Outcome]) -> list[str]:
    """The candidates refused by an estimate or a timeout: a request naming one may have it
    judged again."""
    return [o.id for o in found if o.refused == "estimate"]
