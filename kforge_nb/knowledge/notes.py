"""Reading notes: a note's file and front matter, the built-in notes, the user's
--knowledge folders, and the pool a target's prompt draws from."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent                # the built-in notes live beside this file
FIELDS = ("targets", "ops", "bottleneck", "isa", "devices", "max_row")
BOUNDS = ("memory", "compute")


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
    isa: tuple[str, ...] = ()               # CPU flags it needs (/proc/cpuinfo's names)
    devices: tuple[str, ...] = ()           # cpu, cuda, mps: where the target must run
    max_row: int | None = None              # only for rows at most this long


def applies_to(note: Note, target: str) -> bool:
    return not note.targets or target in note.targets or "*" in note.targets


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
    row = fields.get("max_row", ())
    if row and not (len(row) == 1 and row[0].isdigit()):
        raise KnowledgeError(f"knowledge note {path}: max_row must be a whole number of "
                             f"elements, not {', '.join(row)}")
    return Note(path.stem, "\n".join(lines[end + 1:]).strip(),
                fields.get("targets") or targets, fields.get("ops", ()),
                fields.get("bottleneck", ()), True, str(path), fields.get("isa", ()),
                fields.get("devices", ()), int(row[0]) if row else None)


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
