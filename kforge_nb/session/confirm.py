"""Deciding duels: two candidates judged again side by side, one as the rival of the other
(the evaluator times both in the same interleaved rounds), where a decision between them was
made without that.

Two places ask for them:
  - after a round (`Loop.settle`): samples of one round were each timed beside the best of
    their time, not beside each other; where one of them would take the best's place on that
    indirect comparison (standing.sibling) or on speedups alone (a judging without a rival),
    the two are timed side by side before it does.
  - the final judging (`--confirm N`): the more candidates a search judges, the likelier its
    best is one whose comparison caught the machine at a lucky moment (the winner's curse). The
    N best distinct candidates are each timed again beside the best; a finalist that comes
    back faster takes its place (Standing.challenged), one that comes back other than correct is
    dropped and said so (a kernel right once and wrong once is not the best).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..intervals import versus_text   # its home: intervals.py, where the views read it too
from ..result import CORRECT, Result
from .records import Attempt, normalised_code

ROUNDS = 1           # deciding duels per finalist: each is itself many interleaved rounds
DEFAULT_WIDE = 3     # finalists when --confirm is not given, for beam and evolve (greedy: none)


@dataclass
class Duel:
    """One candidate timed again beside a rival: the head-to-head, or why there is none."""
    attempt: Attempt
    rival: Attempt
    versus: dict | None = None
    state: str = ""
    message: str = ""

    @property
    def dropped(self) -> str | None:
        """The id of the one that came back wrong: the candidate, or the rival whose timed
        output the judge found wrong."""
        if self.state and self.state != CORRECT:
            return self.attempt.id
        return self.rival.id if (self.versus or {}).get("rival_wrong") else None

    @property
    def decided(self) -> bool:
        return self.state == CORRECT and bool(self.versus) and \
            self.versus.get("verdict") in ("faster", "slower", "tie")

    def to_dict(self) -> dict:
        return {"id": self.attempt.id, "rival": self.rival.id, "state": self.state,
                "versus": self.versus, "message": self.message, "dropped": self.dropped}


def finalists(attempts: list[Attempt], rank, count: int) -> list[Attempt]:
    """The `count` best correct candidates with a real timing, one per kernel text (two samples
    that wrote the same code, comments and blank lines aside, are one finalist)."""
    timed = [a for a in attempts if a.result.state == CORRECT and a.code
             and a.result.timing.real and a.result.timing.candidate_ms]
    chosen, codes = [], set()
    for attempt in sorted(timed, key=rank):
        key = normalised_code(attempt.code)
        if key not in codes:
            chosen.append(attempt)
            codes.add(key)
        if len(chosen) >= count:
            break
    return chosen


def fight(attempt: Attempt, rival: Attempt, judge: Callable[[Attempt, Attempt], Result]) -> Duel:
    """`attempt` judged again with `rival` timed beside it."""
    result = judge(attempt, rival)
    duel = Duel(attempt, rival, result.timing.versus, result.state)
    if result.state != CORRECT:
        duel.message = result.message
    elif not duel.decided:
        duel.message = (result.timing.versus or {}).get("why") or "no head-to-head was timed"
    return duel


def duel_text(d: dict) -> str:
    """One deciding duel in words: "1.1 vs 1.0: 1.21x faster side by side (1.15-1.27x)"."""
    versus = d.get("versus") or {}
    if d.get("state") and d["state"] != CORRECT:
        return f"{d['id']} dropped: {d['state']} when judged again ({d.get('message', '')})"
    if versus.get("rival_wrong"):
        return f"{d['rival']} dropped: wrong when timed again beside {d['id']} ({versus['why']})"
    if versus.get("verdict") not in ("faster", "slower", "tie"):
        return f"{d['id']} vs {d['rival']}: not decided ({d.get('message') or versus.get('why')})"
    return f"{d['id']} vs {d['rival']}: {versus_text(versus)}"


def sentence(data: dict) -> str:
    """The `confirmed` event in words, for every view."""
    parts = [duel_text(d) for d in data.get("judged", []) if "rival" in d]
    if not parts:       # a run saved before duels: its finalists' medians
        parts = [f"{j['id']} {j['median']:.2f}x" for j in data.get("judged", [])
                 if j.get("median") is not None]
    moved = f", was {data['before']}" if data["before"] != data["best"] else ", as measured"
    return (f"final judging (each finalist timed again beside the best): {'; '.join(parts)}. "
            f"Best is {data['best']}{moved}")
