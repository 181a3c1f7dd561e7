"""The parent's clock against the candidate worker's: is what the worker says it measured
possible, given how long the parent waited for it?

The worker times each call itself (it must: device events and per-call samples live there),
but the worker is the candidate's process, and its timer can be rebound or raced. The parent
brackets every block with its own monotonic clock. A block's wall time is its calls plus a
per-call overhead the harness adds around them (refreshing inputs, flushing caches, the reply),
which the judge's blocks, run by the same harness on the same input sets, measure honestly. A
candidate block whose wall time the calls it reports cannot explain, by far and in every round,
is a clock that lies (or work done where the clock does not look): the parent's own figure is
then the one that counts, and the verdict says so.
"""
from __future__ import annotations

from dataclasses import dataclass

FAR = 5.0             # the parent's figure this many times the worker's ...
UNEXPLAINED_MS = 1.0  # ... and this much unexplained time per call, in every round


@dataclass
class Block:
    samples: list[float]      # the worker's per-call times, ms
    wall_ms: float            # the parent's clock around the whole block, ms


def outside_ms(judge: Block, candidate: Block, passes: int = 1) -> tuple[float, float]:
    """(the worker's mean per call, the parent's estimate per call) for one round.

    `passes`: how many times the harness runs each call in a block (2 on a GPU: the timed
    pass and the wall-clock pass)."""
    n_j, n_c = len(judge.samples), len(candidate.samples)
    overhead = max(0.0, judge.wall_ms - passes * sum(judge.samples)) / max(n_j, 1)
    said = sum(candidate.samples) / max(n_c, 1)
    unexplained = (candidate.wall_ms - passes * sum(candidate.samples)) / max(n_c, 1) - overhead
    return said, said + max(0.0, unexplained) / passes


def disagreement(rounds: list[tuple[Block, Block]], passes: int = 1) -> str:
    """Why the worker's clock cannot be believed, or "" when the parent's agrees."""
    if not rounds:
        return ""
    worst = []
    for judge, candidate in rounds:
        said, seen = outside_ms(judge, candidate, passes)
        if not (seen > FAR * said and seen - said > UNEXPLAINED_MS):
            return ""
        worst.append((said, seen))
    said, seen = max(worst, key=lambda p: p[1] / max(p[0], 1e-9))
    return (f"the worker's clock said {said:.4g} ms a call where the parent's clock saw "
            f"{seen:.4g} ms, in all {len(rounds)} rounds: its timer was replaced or its work "
            "ran where the timer does not look")
