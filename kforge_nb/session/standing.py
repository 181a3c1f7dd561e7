"""Where the candidates stand: which is best, which tied with the best of their time, and the
order a search expands them in.

Decided head to head. Each candidate is timed beside the best of its time, in the same
interleaved rounds (the evaluator's rival, `Timing.versus`): it takes the best's place only when
that comparison says "faster" (its interval above 1 and clear of what a kernel shows against
itself); "tie" leaves the earlier one best. A ratio to eager or torch.compile is a figure to
show, never a decision across judgings: eager's own time swings tenfold on a contested CPU.

Where two candidates were not timed beside each other, in this order:
  - a deciding duel the loop ran for them (`duels`, keyed (candidate id, rival id));
  - siblings timed beside the same rival: the ratio of their ratios, its interval from theirs,
    marked indirect (the loop settles those with a duel: `undecided`);
  - else, for judgings without a head-to-head (a saved run from before, the interpreter), the
    speedups' intervals (intervals.compare), as before.
An --objective ranks by its own numbers instead.
"""
from __future__ import annotations

from .. import intervals, measures
from ..intervals import decided
from ..evaluator import EvalOptions
from ..result import CORRECT
from .records import Attempt

AS_COMPARE = {"faster": "better", "slower": "worse", "tie": "tie"}


class Standing:
    """The ranks of one session's candidates, from its history, the deciding duels and the
    options' objective."""

    def __init__(self, options: EvalOptions, duels: dict | None = None,
                 dropped: set | None = None):
        self.options = options
        # deciding duels: {(candidate id, rival id): versus dict}, from the loop (settle,
        # the final judging); shared with the copies made for earlier moments (outcomes)
        self.duels: dict[tuple[str, str], dict] = duels if duels is not None else {}
        self.confirmed: dict[str, float] = {}    # saved runs of before: read, not decided by
        self.outranked: set[str] = set()
        self.undecided: list[tuple[str, str]] = []   # (candidate, best) compared indirectly
        # candidates that came back wrong when timed again (as the duel's candidate or its
        # rival): right once and wrong once is not the best, nor anyone's rival
        self.dropped: set[str] = dropped if dropped is not None else set()
        self._cache: tuple | None = None         # (key, best, ties)

    def of(self, history: list[Attempt]) -> tuple[Attempt | None, dict[str, str]]:
        """The best and the ties ({candidate id: the id it tied with}): the correct candidates
        walked in id order, each against the best so far (see the module docstring); then a
        deciding duel that shows another candidate faster than that best moves it there."""
        attempts = list(history)
        key = (id(history), len(attempts), len(self.duels), len(self.dropped),
               self.options.objective)
        cached = self._cache
        if cached is not None and cached[0] == key:
            return cached[1], cached[2]
        correct = sorted((a for a in attempts if a.result.state == CORRECT and not a.same_as
                          and a.id not in self.dropped),
                         key=lambda a: (a.iteration, a.sample))
        best, ties, undecided = None, {}, []
        for attempt in correct:
            if best is None:
                best = attempt
                continue
            mine, theirs = self.point_rank(attempt), self.point_rank(best)
            if mine[0] == 0 or theirs[0] == 0:
                if mine < theirs:
                    best = attempt
                continue
            verdict, direct = self.compare(attempt, best)
            if not direct and verdict != "worse":
                undecided.append((attempt.id, best.id))
            if verdict == "better":
                best = attempt
            elif verdict == "tie":
                ties[attempt.id] = best.id
        best = self.challenged(best, {a.id: a for a in correct})
        self.undecided = undecided
        self._cache = (key, best, ties)
        return best, ties

    def compare(self, a: Attempt, b: Attempt) -> tuple[str, bool]:
        """Candidate `a` against the best `b`: ("better" | "tie" | "worse", whether the two
        were timed side by side)."""
        duel = self.duel(a, b)
        if duel is not None:
            return AS_COMPARE[duel["verdict"]], True
        theirs = sibling(a, b)
        if theirs is not None:
            return AS_COMPARE[theirs["verdict"]], False
        return intervals.compare(a.result.timing, b.result.timing), False

    def duel(self, a: Attempt, b: Attempt) -> dict | None:
        """The head-to-head of `a` against `b` where the two were timed side by side: in a's
        judging, a deciding duel, or b's judging beside a (turned round)."""
        mine = a.result.timing.versus
        if decided(mine) and mine.get("id") == b.id:
            return mine
        if decided(self.duels.get((a.id, b.id))):
            return self.duels[(a.id, b.id)]
        if decided(self.duels.get((b.id, a.id))):
            return turned(self.duels[(b.id, a.id)])
        theirs = b.result.timing.versus
        return turned(theirs) if decided(theirs) and theirs.get("id") == a.id else None

    def challenged(self, best: Attempt | None, by_id: dict[str, Attempt]) -> Attempt | None:
        """A deciding duel that shows another candidate faster than the walk's best (the
        final judging's) puts it there, until none does."""
        seen = set()
        while best is not None and best.id not in seen:
            seen.add(best.id)
            for other in by_id.values():
                if other is best or self.point_rank(other)[0] == 0:
                    continue
                duel = self.duels.get((other.id, best.id))
                duel = duel if decided(duel) else turned(self.duels.get((best.id, other.id)))
                if duel is not None and duel["verdict"] == "faster":
                    best = other
                    break
        return best

    def relative(self, history: list[Attempt], best: Attempt | None) -> dict[str, float]:
        """Each correct candidate's time over the best's, following head-to-heads out from
        the best (a product of side-by-side ratios; every judging with a rival links to the
        chain of bests); candidates out of reach are absent."""
        if best is None:
            return {}
        edges: dict[str, list[tuple[str, float]]] = {}

        def link(a: str, b: str, duel: dict | None) -> None:
            if decided(duel) and duel.get("ratio"):
                # ratio = time b / time a: from a's time to b's multiply by it
                edges.setdefault(a, []).append((b, duel["ratio"]))
                edges.setdefault(b, []).append((a, 1.0 / duel["ratio"]))
        for attempt in history:
            if attempt.result.state == CORRECT and not attempt.same_as:
                versus = attempt.result.timing.versus
                if versus:
                    link(attempt.id, versus.get("id"), versus)
        for (a, b), duel in self.duels.items():
            link(a, b, duel)
        times, todo = {best.id: 1.0}, [best.id]
        while todo:
            here = todo.pop(0)
            for there, ratio in edges.get(here, []):
                if there not in times:
                    times[there] = times[here] * ratio
                    todo.append(there)
        return times

    def forget(self) -> None:
        """Drop the cached answer (a resumed session's history is a new one)."""
        self._cache = None

    def point_rank(self, attempt: Attempt) -> tuple:
        """Lower ranks first: by the objective (--objective) where the candidate has that
        measure, ahead of those without it, which rank by speed (1, time)."""
        score = measures.score(attempt.result, self.options.objective)
        if score is not None:
            return (0, score)
        return (1, attempt.speed)

    def rank(self, attempt: Attempt, best: Attempt | None,
             relative: dict[str, float] | None = None) -> tuple:
        """The order the search expands candidates in: the point ranks, with the best (ties
        are ties) ahead of those ranked by speed, a candidate's speed its time over the
        best's side by side where head-to-heads reach it (`relative`), and a repeat of an
        earlier candidate's code (same_as) behind every other."""
        rank = self.point_rank(attempt)
        if rank[0] == 0:
            return rank
        known = (relative or {}).get(attempt.id)
        return (1, bool(attempt.same_as), attempt is not best, known is None,
                known if known is not None else rank[1])


def turned(duel: dict | None) -> dict | None:
    """A head-to-head seen from the other side (the rival's)."""
    if not decided(duel):
        return None
    flip = {"faster": "slower", "slower": "faster", "tie": "tie"}[duel["verdict"]]
    low, high = duel["ci"]
    return {**duel, "ratio": 1.0 / duel["ratio"], "ci": [1.0 / high, 1.0 / low],
            "verdict": flip}


def sibling(a: Attempt, b: Attempt) -> dict | None:
    """`a` against `b` through a rival both were timed beside (samples of one round): the ratio
    of their ratios, its interval from their intervals' ends, the larger noise."""
    mine, theirs = a.result.timing.versus, b.result.timing.versus
    if not (decided(mine) and decided(theirs)) or mine.get("id") != theirs.get("id"):
        return None
    ratio = mine["ratio"] / theirs["ratio"]
    low, high = mine["ci"][0] / theirs["ci"][1], mine["ci"][1] / theirs["ci"][0]
    noise = max(mine.get("noise", 0.0), theirs.get("noise", 0.0))
    verdict = "tie"
    if low > 1 and ratio > 1 + noise:
        verdict = "faster"
    elif high < 1 and ratio < 1 / (1 + noise):
        verdict = "slower"
    return {"id": b.id, "ratio": ratio, "ci": [low, high], "noise": noise, "verdict": verdict,
            "indirect": mine["id"]}
