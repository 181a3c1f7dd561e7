"""Which problems a bench runs, and which candidate file goes with each.

A folder in KernelBench layout (`level1/`, `level2/`, ... each holding problems) or flat
(problems directly inside), or problem files named one by one. A problem's id is its path
relative to the folder without `.py`: `level1/19_ReLU`, or `softmax` in a flat folder.

With `--candidates DIR`, a problem's candidate is found, in this order, at its id's path
(`DIR/level1/19_ReLU.py`), by its file name anywhere in DIR (`19_ReLU.py`), or under
KernelBench's own naming of generated kernels (`level_1_problem_19_sample_0_kernel.py`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

LEVEL = re.compile(r"level_?(\d+)$")


@dataclass(frozen=True)
class Entry:
    id: str            # level1/19_ReLU
    path: Path


def problem_files(paths: list[str | Path]) -> list[Path]:
    return [entry.path for entry in entries(paths)]


def entries(paths: list[str | Path]) -> list[Entry]:
    """The problems under `paths`, in a stable order, each with its id."""
    found: list[Entry] = []
    for root in map(Path, paths):
        if root.is_file():
            found.append(Entry(root.stem, root))
            continue
        if not root.is_dir():
            raise FileNotFoundError(f"{root}: no such problem file or folder")
        levels = sorted((d for d in root.iterdir() if d.is_dir() and LEVEL.match(d.name)),
                        key=lambda d: int(LEVEL.match(d.name).group(1)))
        for folder in levels or [root]:
            found += [Entry(str(f.relative_to(root).with_suffix("")), f)
                      for f in sorted(folder.glob("*.py"), key=natural)
                      if not f.name.startswith("_")]
    ids = [e.id for e in found]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise ValueError(f"two problems share the id {twice[0]!r}: a bench names each "
                         f"problem by its path; give folders whose files differ")
    return found


def natural(path: Path):
    """`2_x.py` before `10_x.py`, as KernelBench numbers its problems."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name)]


def candidate_for(entry: Entry, folder: Path) -> Path | None:
    exact = folder / f"{entry.id}.py"
    if exact.is_file():
        return exact
    named = sorted(folder.rglob(entry.path.name))
    if named:
        return named[0]
    level = LEVEL.match(entry.path.parent.name)
    number = re.match(r"(\d+)_", entry.path.name)
    if level and number:
        pattern = f"level_{int(level.group(1))}_problem_{int(number.group(1))}_sample_*.py"
        generated = sorted(folder.rglob(pattern), key=natural)
        if generated:
            return generated[0]
    return None
