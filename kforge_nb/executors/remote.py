"""What a Dask worker runs for one candidate, and how its files come home.

The worker may be another machine (a Mac for Metal, a GPU box): it evaluates into a folder of
its own, then sends back the Result with the evaluation's files (candidate, result.json, logs,
traces; large files are listed instead of sent). The client writes them into the session's
folder, so a run's artifacts look the same wherever its candidates were judged.
"""
from __future__ import annotations

import json
import socket
import stat
import tempfile
from pathlib import Path

from ..result import Result

FILE_LIMIT = 16 << 20          # bytes per file sent back
TOTAL_LIMIT = 64 << 20         # bytes per evaluation sent back


def judge_on_worker(problem, code, target_name: str, options) -> tuple[dict, dict, str, str]:
    """Evaluate here; return (result dict, {relative path: bytes}, this folder, worker name)."""
    import dataclasses
    from ..evaluator import evaluate
    with tempfile.TemporaryDirectory(prefix="kforge-eval-") as tmp:
        folder = Path(tmp) / "eval"
        options = dataclasses.replace(options, out_dir=tmp)
        result = evaluate(problem, code, target_name, options, folder=folder)
        return result.to_dict(), packed(folder), str(folder), worker_name()


def worker_name() -> str:
    try:
        from distributed import get_worker
        worker = get_worker()
        return f"{worker.name} ({worker.address})"
    except (ImportError, ValueError):
        return socket.gethostname()


def packed(folder: Path) -> dict[str, bytes]:
    """The evaluation's regular files, to send back within the limits (the rest listed in
    NOT_COPIED.txt). The candidate could have put anything in the folder (under --no-sandbox,
    all of it), so it is walked without following a link and each file read through
    safe_open: a FIFO is never waited on, a link to a file of yours never read."""
    from ..evaluator.sandbox.safe_open import read_regular
    from ..evaluator.sandbox.usage import MAX_ENTRIES, walk
    files, total, left = {}, 0, []
    for fd, name, info, relative in walk(str(folder), MAX_ENTRIES):
        if not stat.S_ISREG(info.st_mode):
            continue
        if info.st_size > FILE_LIMIT or total + info.st_size > TOTAL_LIMIT:
            left.append(f"{relative} ({info.st_size} bytes)")
            continue
        try:
            files[relative] = read_regular(name, min(FILE_LIMIT, TOTAL_LIMIT - total), fd)
        except OSError:
            continue          # swapped for a link or a FIFO since the walk looked
        total += len(files[relative])
    if left:
        files["NOT_COPIED.txt"] = ("Left on the worker (too large to send back):\n"
                                   + "\n".join(sorted(left)) + "\n").encode()
    return dict(sorted(files.items()))


def unpacked(answer: tuple[dict, dict, str, str], folder: Path) -> Result:
    """The worker's Result, its files written into `folder` and its paths pointing there."""
    from .. import artifacts
    result_dict, files, remote_folder, worker = answer
    folder = folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        if (folder / name).resolve().is_relative_to(folder.resolve()):   # nothing outside it
            artifacts.write_bytes(folder / name, data)
    text = json.dumps(result_dict).replace(json.dumps(remote_folder)[1:-1],
                                           json.dumps(str(folder))[1:-1])
    result = Result.from_dict(json.loads(text))
    result.worker = worker
    artifacts.write_json(folder / "result.json", result.to_dict())
    return result
