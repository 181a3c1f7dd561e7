"""The sandbox from outside, in your process: what a candidate's worker holds while it runs,
checked against its caps, and what of it outlives the worker.

Read from kernel tables and file metadata only (mountinfo, statvfs, lstat through folder
descriptors), never by opening what the candidate made, except the regular files of its HOME
that are kept, and those through safe_open (no FIFO waited on, no link followed, bounded).

* memory: what it wrote into its own tmpfs (/tmp, /dev/shm, HOME, the memory exchange), found
  by their source name in its mount table (it can mount nothing, so it cannot forge one) and
  read with statvfs through /proc/PID/root. process.py adds its processes' memory and checks
  the sum against the one cap;
* disk: its folders on disk (its kernel cache, the exchange for outputs too large for memory;
  HOME and the memory exchange where no tmpfs of its own could be mounted), each walked before
  every reply is taken and twice a second while one is awaited, a bounded number of entries,
  against its cap;
* after it: its HOME's small regular files copied beside the run's artifacts; its cache and
  that copy pruned (anything but files and folders removed; all of it when over its cap);
  the exchange on disk emptied; the memory exchange's link removed.
"""
from __future__ import annotations

import os
import shutil
import stat
import time

from . import safe_open
from .layout import CACHE_CAP, TMPFS_TAG, exchange_link
from .root import mount_table

MAX_ENTRIES = 20_000     # files and folders a capped folder may hold (each costs the kernel)
MAX_DEPTH = 16
LOOK_EVERY_S = 0.5       # how often its folders on disk are walked while a reply is awaited
HOME_KEPT = 16 << 20     # what of its HOME is kept with the artifacts: at most this many bytes
HOME_FILES = 256         # ... in at most this many files and folders


def own_mounts(pid: int) -> list[str]:
    """The tmpfs mounts that are the sandboxed worker `pid`'s own, as its root shows them."""
    try:
        table = mount_table(pid)
    except OSError:
        return []
    return [mount for mount, _, kind, source in table if kind == "tmpfs" and source == TMPFS_TAG]


def tmpfs_bytes(pid: int, mounts: list[str]) -> int:
    """Bytes the worker `pid` holds in these tmpfs of its own (a file unlinked but still open
    counts: a tmpfs counts its blocks, not its names)."""
    used = 0
    for mount in mounts:
        try:
            fs = os.statvfs(f"/proc/{pid}/root{mount}")
        except OSError:
            continue             # each is capped by its own size all the same
        used += (fs.f_blocks - fs.f_bfree) * fs.f_frsize
    return used


def walk(top: str, entries: int):
    """(parent folder's descriptor, name, lstat, path relative to `top`) of each file and folder
    under `top`, a folder before what it holds, at most `entries` of them. Every folder is
    opened from its parent's descriptor without following a link, so a folder the candidate
    swaps for a link meanwhile leads nowhere."""
    try:
        fd = safe_open.open_folder(top)
    except OSError:
        return
    try:
        yield from _entries(fd, "", [entries], 0)
    finally:
        os.close(fd)


def _entries(fd: int, prefix: str, budget: list[int], depth: int):
    names = []
    with os.scandir(fd) as listing:
        for entry in listing:
            if len(names) >= budget[0]:
                break
            names.append(entry.name)
    for name in names:
        if budget[0] <= 0:
            return
        budget[0] -= 1
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            continue
        yield fd, name, info, prefix + name
        if stat.S_ISDIR(info.st_mode) and depth < MAX_DEPTH:
            try:
                sub = safe_open.open_folder(name, fd)
            except OSError:
                continue
            try:
                yield from _entries(sub, prefix + name + "/", budget, depth + 1)
            finally:
                os.close(sub)


def folder_bytes(top: str) -> tuple[int, int]:
    """(bytes on disk, entries) under `top`; entries past MAX_ENTRIES are not looked at."""
    used = count = 0
    for _, _, info, _ in walk(top, MAX_ENTRIES + 1):
        used += info.st_blocks * 512
        count += 1
    return used, count


class Watch:
    """A sandboxed worker seen from outside, for process.Worker: the bytes in its own tmpfs,
    read at every look, and its folders on disk, walked every LOOK_EVERY_S and whenever asked
    to look `now`. Its own tmpfs are found in its mount table, read at each walk until its
    first message (its sandbox is complete before the worker says anything), then once more
    and no longer: nothing it can do adds one."""

    def __init__(self, spec: dict, pid: int):
        self.on = bool(spec.get("enabled"))
        self.folders = (spec.get("disk_caps") or []) if self.on else []
        self.pid = pid
        self.mounts: list[str] = []
        self.settled = False
        self.due = 0.0

    def settle(self) -> None:
        """Its first message has come: its own tmpfs are where they stay."""
        if self.on and not self.settled:
            self.mounts, self.settled = own_mounts(self.pid), True

    def in_tmpfs(self) -> int:
        """Bytes it holds in its own tmpfs (as of the last look at its mount table)."""
        return tmpfs_bytes(self.pid, self.mounts) if self.mounts else 0

    def disk_over(self, now: bool = False) -> str:
        """What it filled past its cap on disk ("" while nothing is): looked at when due, or
        `now`."""
        if not self.on or not now and time.monotonic() < self.due:
            return ""
        self.due = time.monotonic() + LOOK_EVERY_S
        if not self.settled:
            self.mounts = own_mounts(self.pid)
        for what, folder, cap in self.folders:
            if folder in self.mounts or os.path.islink(folder):
                continue             # a tmpfs of its own: counted as its memory
            used, count = folder_bytes(folder)
            if used > cap or count > MAX_ENTRIES:
                many = f"more than {MAX_ENTRIES} files and folders" if count > MAX_ENTRIES \
                    else f"{used / 2**30:.2f} GiB"
                return (f"filled {what} ({folder}) past its cap: {many}, where {cap / 2**30:.2g} "
                        f"GiB and {MAX_ENTRIES} entries are allowed")
        return ""


def keep_home(spec: dict, pid: int) -> None:
    """What the candidate left in its HOME (a tmpfs of its own, gone with the worker), copied
    by your process into the run folder's sandbox/: its regular files and folders, at most
    HOME_FILES of them and HOME_KEPT bytes; links, FIFOs and the rest are neither followed nor
    kept. Where HOME is no tmpfs of its own, what it wrote is there already."""
    home = spec.get("home") if spec.get("enabled") else None
    if not home or home not in own_mounts(pid):
        return
    left = HOME_KEPT
    for fd, name, info, relative in walk(f"/proc/{pid}/root{home}", HOME_FILES):
        kept = os.path.join(home, relative)
        try:
            if stat.S_ISDIR(info.st_mode):
                os.makedirs(kept, exist_ok=True)
            elif stat.S_ISREG(info.st_mode) and info.st_size <= left:
                data = safe_open.read_regular(name, left, dir_fd=fd)
                left -= len(data)
                out = os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW |
                              os.O_CLOEXEC, 0o644)
                with os.fdopen(out, "wb") as f:
                    f.write(data)
        except OSError:
            continue


def tidy(spec: dict, pid: int) -> None:
    """After the worker `pid`: the memory exchange's link removed, what it left in the
    exchange on disk removed (your process has copied what it keeps), its cache and what
    is kept of its HOME pruned (where HOME was no tmpfs of its own, it wrote there itself)."""
    if not spec.get("enabled"):
        return
    place = spec.get("memory_exchange")
    try:
        if place and os.path.islink(place) and os.readlink(place) == exchange_link(pid, place):
            os.unlink(place)
    except OSError:
        pass
    empty(os.path.join(spec["folder"], "exchange"))
    prune(spec["cache"], CACHE_CAP)
    prune(spec["home"], spec["tmp_bytes"])


def empty(folder: str) -> None:
    """Everything in `folder` removed, never through a link; the folder stays."""
    try:
        fd = safe_open.open_folder(folder)
    except OSError:
        return
    try:
        for name in os.listdir(fd):
            try:
                if stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    shutil.rmtree(name, dir_fd=fd)
                else:
                    os.unlink(name, dir_fd=fd)
            except OSError:
                pass
    finally:
        os.close(fd)


def prune(folder: str, cap: int) -> None:
    """A folder the candidate wrote, kept only as files and folders within its cap: links,
    FIFOs and sockets are removed, and all of it when it holds more (for its kernel cache: the
    next judging of the same text compiles again)."""
    used = count = 0
    for fd, name, info, _ in walk(folder, MAX_ENTRIES + 1):
        used += info.st_blocks * 512
        count += 1
        if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
            try:
                os.unlink(name, dir_fd=fd)
            except OSError:
                pass
    if used > cap or count > MAX_ENTRIES:
        shutil.rmtree(folder, ignore_errors=True)
