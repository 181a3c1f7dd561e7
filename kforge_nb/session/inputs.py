"""Files a session reads besides the problem: auxiliary prompt files and kernels to translate."""
from __future__ import annotations

from pathlib import Path


def parse_aux(spec: str) -> tuple[str, str, set[int] | None]:
    """`PATH` (every iteration) or `PATH@0,2` (iterations 0 and 2 only)."""
    path, _, only = spec.partition("@")
    if not Path(path).is_file():
        raise FileNotFoundError(f"--aux {path!r} is not a file")
    iterations = {int(i) for i in only.split(",") if i.strip()} if only else None
    return Path(path).name, Path(path).read_text(), iterations


def load_translation(source: str | None) -> str | None:
    """`--from`: a candidate file, or a run folder whose best candidate to translate."""
    if not source:
        return None
    path = Path(source)
    if path.is_dir():
        path = path / "best_candidate.py"
    if not path.is_file():
        raise FileNotFoundError(f"--from {source!r}: no candidate file (or run folder with "
                                "best_candidate.py) there")
    return path.read_text()

