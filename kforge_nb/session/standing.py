"""Where the candidates stand: which is best, which tied with the best of their time, and the
order a search expands them in.

Ties are ties: a candidate takes the best's place only when it is faster and their 95 %
intervals separate (its low end above the best's high end, see intervals.compare); otherwise
the earlier stays best and the candidate is marked a tie. An --objective, or the final judging's
medians (confirm.py), rank by their own numbers instead."""
from __future__ import annotations

from .. import intervals, measures
from ..evaluator import EvalOptions
from ..result import CORRECT
from .records import Attempt


class Standing:
    """The ranks of one session's candidates, from its history, the final judging's
    `confirmed` medians and `outranked` ids, and the options' objective."""

    def __init__(self, options: EvalOptions):
        self.options = options
        self.confirmed: dict[str, float] = {}    # finalists' median speedups (the final judging)
        self.outranked: set[str] = set()         # correct candidates that were not finalists
        self._cache: tuple | None = None         # (key, best, ties)

    def of(self, history: list[Attempt]) -> tuple[Attempt | None, dict[str, str]]:
        """The best and the ties ({candidate id: the id it tied with}), walking the correct
        candidates in id order: a candidate takes the best's place only when it beats it (the
        objective, or the final judging's median, where those rank it; else intervals.compare:
        faster with separate intervals). A candidate with an earlier one's code (same_as) does
        not compete."""
        attempts = list(history)
        key = (id(history), len(attempts), tuple(sorted(self.confirmed.items())),
               tuple(sorted(self.outranked)), self.options.objective)
        cached = self._cache
        if cached is not None and cached[0] == key:
            return cached[1], cached[2]
        correct = sorted((a for a in attempts if a.result.state == CORRECT and not a.same_as),
                         key=lambda a: (a.iteration, a.sample))
        best, ties = None, {}
        for attempt in correct:
            if best is None:
                best = attempt
                continue
            mine, theirs = self.point_rank(attempt), self.point_rank(best)
            if mine[0] == 0 or theirs[0] == 0 or self.confirmed:
                if mine < theirs:
                    best = attempt
                continue
            verdict = intervals.compare(attempt.result.timing, best.result.timing)
            if verdict == "better":
                best = attempt
            elif verdict == "tie":
                ties[attempt.id] = best.id
        self._cache = (key, best, ties)
        return best, ties

    def forget(self) -> None:
        """Drop the cached answer (a resumed session's history is a new one)."""
        self._cache = None

    def point_rank(self, attempt: Attempt) -> tuple:
        """Lower ranks first: by the objective (--objective) where the candidate has that
        measure, ahead of those without it, which rank by speed as always."""
        score = measures.score(attempt.result, self.options.objective)
        if score is not None:
            return (0, score)
        # after the final judging, the finalists rank by their median (and ahead of the
        # candidates that did not make it); a candidate judged later competes as measured
        median = self.confirmed.get(attempt.id)
        return (1, attempt.id in self.outranked, 1.0 / median if median else attempt.speed)

    def rank(self, attempt: Attempt, best: Attempt | None) -> tuple:
        """The order the search expands candidates in: the point ranks, with the best (ties
        are ties) ahead of those ranked by speed, and a repeat of an earlier candidate's code
        (same_as) behind every other."""
        rank = self.point_rank(attempt)
        if rank[0] == 0:
            return rank
        return (1, bool(attempt.same_as), rank[1], attempt is not best, *rank[2:])
