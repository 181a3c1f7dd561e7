"""Choosing notes: which of the notes that apply to a request rank highest, and why."""
from __future__ import annotations

from dataclasses import dataclass

from .notes import Note, applies_to
from .ops import op_key

LIMIT = 3                       # notes per prompt


@dataclass(frozen=True)
class Pick:
    note: Note
    score: int
    why: str                                # "gpu_reductions (ops: softmax; bottleneck: memory)"


def choose(notes, target: str, ops: set[str], bound: str | None = None,
           limit: int = LIMIT) -> list[Pick]:
    """The `limit` notes that best fit: a note about ops the problem uses (+3), one that helps
    with the profile's bottleneck (+2, -1 when it names only the other one), one with front
    matter (+1) over one without. A note about other ops only is left out."""
    picks = []
    for note in notes:
        if not applies_to(note, target):
            continue
        hits = [op for op in note.ops if op != "*" and op_key(op) in ops]
        if note.ops and "*" not in note.ops and not hits:
            continue
        helps = bool(bound) and bound in note.bottleneck
        score = 3 * bool(hits) + note.front_matter
        if bound and note.bottleneck:
            score += 2 if helps else -1
        reasons = ([f"ops: {', '.join(hits)}"] if hits else []) + \
            ([f"bottleneck: {bound}"] if helps else [])
        why = f"{note.name} ({'; '.join(reasons) or f'general {target} advice'})"
        picks.append(Pick(note, score, why))
    picks.sort(key=lambda p: (-p.score, p.note.name))
    return picks[:limit]
