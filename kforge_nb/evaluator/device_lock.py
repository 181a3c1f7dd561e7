"""One timing at a time per device, across the threads of this process and across processes.

Concurrent timing on one device lies, whether the other timer is a thread of this process
(samples of one round) or another evaluation worker (`kforge bench --workers N` on one CPU or
one GPU). Compiling and checking go on in parallel; only timing and profiling take the lock.
Workers pinned to different GPUs (CUDA_VISIBLE_DEVICES) hold different locks and time at once.
"""
from __future__ import annotations

import fcntl
import os
import re
import threading
from contextlib import contextmanager

from ..runtime.native import cache_dir

_THREAD_LOCKS: dict[str, threading.Lock] = {}
_GUARD = threading.Lock()


def device_key(device: str) -> str:
    """A name for the physical device a worker of this process times on."""
    if device.startswith("cuda"):
        device = f"cuda-{os.environ.get('CUDA_VISIBLE_DEVICES') or 'all'}"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", device)


@contextmanager
def timing_lock(device: str):
    key = device_key(device)
    with _GUARD:
        local = _THREAD_LOCKS.setdefault(key, threading.Lock())
    with local:                        # threads first: flock does not exclude them
        folder = cache_dir() / "locks"
        folder.mkdir(exist_ok=True)
        with open(folder / f"{key}.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
