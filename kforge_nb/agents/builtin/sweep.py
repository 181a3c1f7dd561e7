"""The knob sweep: a round's extra samples are sample 0 with other knobs, and only knob changes
that change what runs count."""
from __future__ import annotations

import dataclasses

from .assemble import Built
from .candidate import kernel_text


def sweep_steps(target, options) -> list[dict]:
    """The knob changes a round's extra samples walk, around the options of sample 0: each
    knob on its own first (the target's list), then pairs of them. Which of them change this
    problem's kernel is found by writing it (a lane block means nothing to a row softmax)."""
    singles = target.sweep_singles(options)
    pairs = [{**a, **b} for i, a in enumerate(singles) for b in singles[i + 1:]
             if not set(a) & set(b)]
    return singles + pairs


def what_runs(built: Built):
    """What tells two written candidates apart at the problem's sizes: the kernels and how they
    are launched there where the writer says (Triton), else the text without its header."""
    if built.code is None:
        return None
    return built.runs if built.runs is not None else kernel_text(built.code)


def vary(target, options, variant: int, write, keep=frozenset()) -> tuple[object, str]:
    """Sample `variant` > 0: the same candidate with other knobs, so that a round's samples are
    a small autotuning sweep around sample 0 rather than copies of it. `write(options)` gives
    what the candidate runs (`what_runs`, or None); only steps that change it count, so no two
    variants of a round (the session numbers them across the round's branches and rounds) run
    the same unless the steps run out. Steps that touch a knob in `keep` (the ones the
    branch's instruction just set) are skipped: undoing the change would judge the parent
    again."""
    base = write(options)
    seen = {base} if base is not None else set()
    distinct = []
    for change in sweep_steps(target, options):
        if keep & set(change):
            continue
        runs = write(dataclasses.replace(options, **change))
        if runs is not None and runs not in seen:
            seen.add(runs)
            distinct.append(change)
            if len(distinct) >= variant:
                break
    if not distinct:
        return options, f"sample {variant}: no knob changes this kernel; same as sample 0"
    change = distinct[(variant - 1) % len(distinct)]
    said = ", ".join(f"{k} {v}" for k, v in change.items())
    return dataclasses.replace(options, **change), f"sample {variant} varies the knobs: {said}"
