"""One timing at a time per device, across the threads of this process and across processes.

Concurrent timing on one device lies, whether the other timer is a thread of this process
(samples of one round) or another evaluation worker (`kforge bench --workers N` on one CPU or
one GPU). Timing and profiling take the lock exclusively. On a GPU, compiling and checking go
on in parallel beside a timing. On the CPU they would run on the cores being timed (g++ -O3
beside a timed OpenMP kernel on a small machine: timings off by 2x and more), so there they
hold the same lock shared (`cpu_work`): any number compile and check at once, none while one
times. Workers pinned to different GPUs hold different locks and time at once.
"""
from __future__ import annotations

import errno
import fcntl
import os
import re
import threading
from contextlib import contextmanager

from ...runtime.native import cache_dir
from ..sandbox import safe_open

_THREAD_LOCKS: dict[str, threading.Lock] = {}
_GUARD = threading.Lock()


def device_key(device: str) -> str:
    """A name for the physical device a worker of this process times on."""
    if device.startswith("cuda"):
        device = f"cuda-{os.environ.get('CUDA_VISIBLE_DEVICES') or 'all'}"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", device)


def _lock_file(key: str):
    """The lock's file, opened anew. Through safe_open: the shared cache is reachable by a
    candidate run with --no-sandbox, and a FIFO in the lock's place would block this open
    (every later evaluation on the machine with it), a link would be followed. What is not
    a regular file there is a plant: removed, and the lock's file made anew."""
    path = cache_dir() / "locks" / f"{key}.lock"
    path.parent.mkdir(exist_ok=True)
    try:
        fd = safe_open.open_regular(path, create=True)
    except OSError as err:
        if not isinstance(err, safe_open.NotRegular) and err.errno != errno.ELOOP:
            raise
        path.unlink(missing_ok=True)
        fd = safe_open.open_regular(path, create=True)
    return os.fdopen(fd, "rb")


@contextmanager
def cpu_work(device: str):
    """Held (shared) while an evaluation works on the CPU outside its timing: a timing of the
    CPU waits for it, and it waits for a timing. Nothing on other devices."""
    if device_key(device) != "cpu":
        yield
        return
    # each holder opens the file anew: flock locks of separate opens exclude one another,
    # threads of this process included
    with _lock_file("cpu") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def timing_lock(device: str):
    key = device_key(device)
    with _GUARD:
        local = _THREAD_LOCKS.setdefault(key, threading.Lock())
    with local:                        # threads queue here, not all on the flock
        with _lock_file(key) as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
