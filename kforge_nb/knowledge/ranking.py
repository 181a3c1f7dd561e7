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


@dataclass(frozen=True)
class Where:
    """What a note's conditions are checked against; None: not known, so a note that needs it
    is left out (a note on AVX-512 is never sent on a guess)."""
    isa: tuple[str, ...] | None = None      # the CPU's flags (machine.Machine.isa)
    device: str | None = None               # where the target runs here: cpu, cuda, mps
    row: int | None = None                  # the problem's row length (shapes.row_length)


def conditions(note: Note, where: Where) -> list[str] | None:
    """The conditions a note states, said as they hold here; None where one does not."""
    held = []
    if note.isa:
        if where.isa is None or not set(note.isa) <= set(where.isa):
            return None
        held.append(f"isa: {', '.join(note.isa)}")
    if note.devices:
        if where.device not in note.devices:
            return None
        held.append(f"device: {where.device}")
    if note.max_row is not None:
        if where.row is None or where.row > note.max_row:
            return None
        held.append(f"rows of {where.row} <= {note.max_row}")
    return held


def choose(notes, target: str, ops: set[str], bound: str | None = None,
           limit: int = LIMIT, where: Where = Where()) -> list[Pick]:
    """The `limit` notes that best fit: a note about ops the problem uses (+3), one that helps
    with the profile's bottleneck (+2, -1 when it names only the other one), one with front
    matter (+1) over one without. A note about other ops only is left out, and so is one whose
    ISA, device or row-length condition does not hold here (or is not known)."""
    picks = []
    for note in notes:
        if not applies_to(note, target):
            continue
        hits = [op for op in note.ops if op != "*" and op_key(op) in ops]
        if note.ops and "*" not in note.ops and not hits:
            continue
        held = conditions(note, where)
        if held is None:
            continue
        helps = bool(bound) and bound in note.bottleneck
        score = 3 * bool(hits) + note.front_matter
        if bound and note.bottleneck:
            score += 2 if helps else -1
        reasons = ([f"ops: {', '.join(hits)}"] if hits else []) + \
            ([f"bottleneck: {bound}"] if helps else []) + held
        why = f"{note.name} ({'; '.join(reasons) or f'general {target} advice'})"
        picks.append(Pick(note, score, why))
    picks.sort(key=lambda p: (-p.score, p.note.name))
    return picks[:limit]
