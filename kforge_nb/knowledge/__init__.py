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

`choose` ranks the notes that apply to a request: its target, the ops its reference uses (read
statically from the source, never run) and the bottleneck of the last profile, when there is
one. Ranking is deterministic; ties go by name. Nothing here imports torch.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from ..pyparse import parse_ast

HERE = Path(__file__).parent
FIELDS = ("targets", "ops", "bottleneck")
BOUNDS = ("memory", "compute")
LIMIT = 3                       # notes per prompt


class KnowledgeError(FileNotFoundError, ValueError):
    """A --knowledge folder that does not exist, or a note whose front matter cannot be read.
    Both a FileNotFoundError and a ValueError: a usage error wherever kforge reports one (the
    CLI and sessions catch the first, the bench and the magic the second)."""


@dataclass(frozen=True)
class Note:
    name: str
    text: str                               # the body, front matter removed
    targets: tuple[str, ...] = ()           # () = every target
    ops: tuple[str, ...] = ()               # () or "*" = any op
    bottleneck: tuple[str, ...] = ()
    front_matter: bool = True
    path: str = ""


@dataclass(frozen=True)
class Pick:
    note: Note
    score: int
    why: str                                # "gpu_reductions (ops: softmax; bottleneck: memory)"


# --- reading notes ----------------------------------------------------------------------------

def read_note(path: str | Path, targets: tuple[str, ...] = ()) -> Note:
    """A note from its file; `targets` is where it applies when its front matter does not say
    (a target's own documents apply to that target)."""
    path = Path(path)
    lines = path.read_text().splitlines()
    if not lines or lines[0].strip() != "---":
        return Note(path.stem, "\n".join(lines).strip(), targets, (), (), False, str(path))
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
    if end is None:
        raise KnowledgeError(f"knowledge note {path}: its front matter (opened by '---' on "
                             "line 1) is never closed by a '---' line")
    fields: dict[str, tuple[str, ...]] = {}
    for number, line in enumerate(lines[1:end], 2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, colon, value = (part.strip() for part in line.partition(":"))
        if not colon or key not in FIELDS:
            raise KnowledgeError(f"knowledge note {path}, line {number}: expected `KEY: [a, b]` "
                                 f"with KEY one of {', '.join(FIELDS)}, not {line.strip()!r}")
        items = (v.strip().strip("'\"") for v in value.strip("[]").split(","))
        fields[key] = tuple(v.lower() for v in items if v)
    wrong = set(fields.get("bottleneck", ())) - set(BOUNDS)
    if wrong:
        raise KnowledgeError(f"knowledge note {path}: bottleneck {', '.join(sorted(wrong))} is "
                             f"not one of {', '.join(BOUNDS)}")
    return Note(path.stem, "\n".join(lines[end + 1:]).strip(),
                fields.get("targets") or targets, fields.get("ops", ()),
                fields.get("bottleneck", ()), True, str(path))


def builtin_paths(target: str | None = None) -> list[Path]:
    """The built-in notes (those for `target` only, when given), by name."""
    paths = sorted(HERE.glob("*.md"))
    if target is None:
        return paths
    return [p for p in paths if applies_to(read_note(p), target)]


NOT_A_FOLDER = "{!r} is not a folder (give a folder of Markdown notes, one topic per .md file)"


def check_folders(folders) -> list[str]:
    """The --knowledge folders as absolute paths; a KnowledgeError for one that is missing."""
    checked = []
    for folder in folders or ():
        path = Path(folder).expanduser()
        if not path.is_dir():
            raise KnowledgeError("--knowledge " + NOT_A_FOLDER.format(str(folder)))
        checked.append(str(path.resolve()))
    return checked


def folder_argument(text: str) -> str:
    """The argparse type of --knowledge: a missing folder is refused as the line is parsed
    (exit 2 in the CLI, a UsageError in the magic), before any run or bench folder is made."""
    if not Path(text).expanduser().is_dir():
        import argparse
        raise argparse.ArgumentTypeError(NOT_A_FOLDER.format(text))
    return text


def user_notes(folders) -> list[Note]:
    """The notes of the user's folders, in order: a later folder's note replaces an earlier
    one of the same name (and any of them a built-in one, see `pool`)."""
    notes: dict[str, Note] = {}
    for folder in check_folders(folders):
        for path in sorted(Path(folder).glob("*.md")):
            notes[path.stem] = read_note(path)
    return list(notes.values())


def pool(target_paths, target: str, extra: list[Note] = ()) -> list[Note]:
    """A target's notes (its `knowledge()` documents) with the user's notes over them."""
    notes = {n.name: n for n in (read_note(p, (target,)) for p in target_paths)}
    notes.update({n.name: n for n in extra})
    return list(notes.values())


# --- what a problem does -----------------------------------------------------------------------

MATMUL = ("matmul",)
IMPLIED = {           # an op's key -> further ops it stands for
    "mm": MATMUL, "bmm": MATMUL, "addmm": MATMUL, "baddbmm": MATMUL, "addbmm": MATMUL,
    "einsum": MATMUL, "linear": MATMUL, "bilinear": MATMUL, "tensordot": MATMUL,
    "convtranspose": ("conv",), "scaleddotproductattention": ("attention", "matmul", "softmax"),
    "multiheadattention": ("attention", "matmul", "softmax"), "crossentropy": ("logsoftmax",),
    "crossentropyloss": ("crossentropy", "logsoftmax"), "softmin": ("softmax",),
}
SKIPPED = {"get_inputs", "get_init_inputs"}     # the inputs' torch.randn is not the problem's


def op_key(name: str) -> str:
    """One spelling for an op: F.layer_norm, nn.LayerNorm and layer_norm -> 'layernorm';
    conv2d, Conv3d -> 'conv'."""
    key = name.lower().replace("_", "")
    return re.sub(r"(?<=[a-z])[123]d$", "", key)


def problem_ops(source: str) -> set[str]:
    """The op keys a reference uses: names of the functions, methods and nn classes it calls,
    and `@`. Read from the source, never executed."""
    try:
        tree = parse_ast(source)
    except SyntaxError:
        return set()
    for node in ast.walk(tree):      # drop get_inputs() & co. before looking at calls
        if isinstance(node, (ast.Module, ast.ClassDef)):
            node.body = [n for n in node.body
                         if not (isinstance(n, ast.FunctionDef) and n.name in SKIPPED)]
    keys = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            keys.add("matmul")
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else \
                func.id if isinstance(func, ast.Name) else ""
            own = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                func.value.id == "self"      # self.fc(x): its class, nn.Linear, is the op
            if name and not own and not name.startswith("_") and name != "super":
                keys.add(op_key(name))
    for key in list(keys):
        keys.update(IMPLIED.get(key, ()))
    return keys


# --- choosing ---------------------------------------------------------------------------------

def applies_to(note: Note, target: str) -> bool:
    return not note.targets or target in note.targets or "*" in note.targets


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
