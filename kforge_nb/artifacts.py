"""Artifact folders: one per evaluation, one per run with a folder per iteration.

Every write goes to a temporary file in the same folder and is renamed into place, so a crash
never leaves half a file behind.
"""
from __future__ import annotations

import json
import math
import os
import re
import threading
import time
from pathlib import Path


def finite(value):
    """NaN and infinity as None, through dicts and lists: JSON has neither (a browser's
    JSON.parse refuses them, and a Python literal in an exported file repeats a JSON line)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def write_bytes(path: str | Path, data: bytes) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # one temporary name per process and thread: samples of a round save state concurrently
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}-{threading.get_ident()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path


def write_text(path: str | Path, text: str) -> Path:
    return write_bytes(path, text.encode("utf-8", errors="surrogateescape"))


def write_json(path: str | Path, data) -> Path:
    return write_text(path, json.dumps(data, indent=2, default=str) + "\n")


def new_folder(root: str | Path, label: str) -> Path:
    """A fresh, uniquely named folder under root: <time>-<label>[-n]."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    stem = time.strftime("%Y%m%d-%H%M%S") + "-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", label)[:40]
    for n in range(1000):
        folder = root / (stem if n == 0 else f"{stem}-{n}")
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    raise RuntimeError(f"could not create an artifact folder under {root}")
