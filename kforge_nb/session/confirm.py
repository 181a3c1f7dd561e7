"""The final judging (`--confirm N`): before a session names its best, the N fastest distinct
candidates are judged again, side by side, and the best is the one with the highest median.

Each candidate was judged once. The more candidates a search judges, the likelier the fastest
measured is one whose single timing caught the machine quiet (the winner's curse): on a busy
2-core host a beam run named a kernel measured at 1.37x eager that ran at 0.63-0.70x in five
later judgings. The finalists are judged ROUNDS more times, in an order that rotates each
round, and compared by their median speedup vs eager, a ratio timed within one evaluation
(eager beside the candidate), so drift between evaluations cancels. A finalist that comes back
other than correct is dropped and said so: a kernel right once and wrong once is not the best.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Callable

from ..result import CORRECT, Result
from .records import Attempt, normalised_code

ROUNDS = 3           # judgings per finalist: a median of three shrugs off one outlier
DEFAULT_WIDE = 3     # finalists when --confirm is not given, for beam and evolve (greedy: none)


@dataclass
class Judged:
    """One finalist's judgings: its speedups vs eager and the states it came back with."""
    attempt: Attempt
    speedups: list[float] = field(default_factory=list)
    states: list[str] = field(default_factory=list)
    message: str = ""

    @property
    def dropped(self) -> bool:
        return any(state != CORRECT for state in self.states)

    @property
    def median(self) -> float | None:
        return statistics.median(self.speedups) if self.speedups and not self.dropped else None

    def to_dict(self) -> dict:
        return {"id": self.attempt.id, "first": self.attempt.result.timing.speedup_vs_eager,
                "speedups": [round(s, 4) for s in self.speedups], "states": self.states,
                "median": self.median, "message": self.message}


def finalists(attempts: list[Attempt], rank, count: int) -> list[Attempt]:
    """The `count` best correct candidates with a real speedup vs eager, one per kernel text
    (two samples that wrote the same code, comments and blank lines aside, are one finalist)."""
    timed = [a for a in attempts if a.result.state == CORRECT and a.code
             and a.result.timing.real and a.result.timing.speedup_vs_eager]
    chosen, codes = [], set()
    for attempt in sorted(timed, key=rank):
        key = normalised_code(attempt.code)
        if key not in codes:
            chosen.append(attempt)
            codes.add(key)
        if len(chosen) >= count:
            break
    return chosen


def judge_again(chosen: list[Attempt], judge: Callable[[Attempt, int], Result],
                go_on: Callable[[], bool], rounds: int = ROUNDS) -> list[Judged]:
    """Each finalist judged `rounds` times, the order rotating each round (no finalist is
    always timed first, on a cold or a warm machine); stops early when `go_on()` says so."""
    judged = [Judged(a) for a in chosen]
    for k in range(rounds):
        for entry in judged[k % len(judged):] + judged[:k % len(judged)]:
            if not go_on():
                return judged
            if entry.dropped:
                continue
            result = judge(entry.attempt, k)
            entry.states.append(result.state)
            if result.state != CORRECT:
                entry.message = result.message[:300]
            elif result.timing.speedup_vs_eager:
                entry.speedups.append(result.timing.speedup_vs_eager)
    return judged


def sentence(data: dict) -> str:
    """The `confirmed` event in words, for every view."""
    parts = []
    for j in data["judged"]:
        first = f"first {j['first']:.2f}x" if j.get("first") else "first -"
        if j["median"] is not None:
            parts.append(f"{j['id']} {j['median']:.2f}x ({first})")
        elif j["states"] and j["states"][-1] != CORRECT:
            parts.append(f"{j['id']} dropped: {j['states'][-1]} when judged again")
        else:
            parts.append(f"{j['id']} not judged whole")
    moved = f", was {data['before']}" if data["before"] != data["best"] else ", as measured"
    return (f"final judging (median speedup vs eager of {ROUNDS} more judgings): "
            f"{'; '.join(parts)}. Best is {data['best']}{moved}")
