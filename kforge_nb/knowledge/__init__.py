"""The knowledge base: short notes on kernel techniques, and which of them a prompt gets.

A note is a Markdown file on one topic (its name is the file's stem) that starts with front
matter saying where it applies:

    ---
    targets: [triton, cuda]          # absent: every target
    ops: [softmax, layer_norm, sum]  # absent or "*": any op; named ops rank it higher
    bottleneck: [memory]             # memory and/or compute: what it helps with
    ---

A note without front matter applies to every op of every target, at the lowest priority. The
built-in notes live beside this file; `--knowledge DIR` adds folders of one's own, whose notes
join the pool (one named like a built-in note replaces it).

A note may also state where it holds: `isa: [avx512f]` (the CPU's flags, as /proc/cpuinfo
names them), `devices: [cuda]` (where the target runs here), `max_row: 32` (only for rows that
short: the last dimension of the problem's largest input, read by shapes.py). A condition that
does not hold, or that is not known, leaves the note out.

`choose` ranks the notes that apply to a request: its target, the ops its reference uses (read
statically from the source, never run) and the bottleneck of the last profile, when there is
one. Ranking is deterministic; ties go by name. Nothing here imports torch.
"""
from __future__ import annotations

from .notes import (BOUNDS, FIELDS, HERE, NOT_A_FOLDER, KnowledgeError, Note, applies_to,
                    builtin_paths, check_folders, folder_argument, pool, read_note, user_notes)
from .ops import IMPLIED, op_key, problem_ops
from .ranking import LIMIT, Pick, Where, choose
from .shapes import input_shapes, row_length

__all__ = [
    "BOUNDS", "FIELDS", "HERE", "IMPLIED", "LIMIT", "NOT_A_FOLDER", "KnowledgeError", "Note",
    "Pick", "Where", "applies_to", "builtin_paths", "check_folders", "choose",
    "folder_argument", "input_shapes", "op_key", "pool", "problem_ops", "read_note",
    "row_length", "user_notes",
]
