"""The candidate worker's file system, set up in its mount namespace: a new root on a tmpfs
holding only the interpreter, its packages, the system folders, the device nodes a kernel
needs, its own /proc; tmpfs of its own for /tmp, /dev/shm, HOME and the memory exchange;
writable only those and its folders; the host's root detached (pivot_root). Where no new root
can be built, the fallback: every mount read-only but its folders (the whole file system
still visible, and said so)."""
from __future__ import annotations

import ctypes
import glob
import os
import platform
import re
import shutil
import stat
import sys
from pathlib import Path

from .layout import TMP_CAP, TMPFS_TAG, exchange_link
from .libc import (MNT_DETACH, MS_BIND, MS_NOATIME, MS_NODEV, MS_NODIRATIME, MS_NOEXEC, MS_NOSUID,
                   MS_PRIVATE, MS_RDONLY, MS_REC, MS_RELATIME, MS_REMOUNT, libc, sys_mount)

# statvfs's f_flag bits, and the mount flags they stand for (a remount must keep the locked ones)
ST_TO_MS = {1: MS_RDONLY, 2: MS_NOSUID, 4: MS_NODEV, 8: MS_NOEXEC, 1024: MS_NOATIME,
            2048: MS_NODIRATIME, 4096: MS_RELATIME}
# Mounts the fallback (no new root) leaves as they are: devices, the kernel's views.
KEEP_MOUNTS = ("/dev", "/proc", "/sys")

SYSTEM_DIRS = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/opt")
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
GPU_DEVICES = ("nvidia*", "nvidia-caps", "dri", "kfd")
# where the new root's tmpfs is mounted while it is built: a folder nobody needs to see
STAGING = ("/dev/shm", "/mnt", "/media", "/srv", "/tmp", "/run")
PROJECT_MARKERS = (".git", ".env", "pyproject.toml", "setup.py", "setup.cfg")
PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
# files and folders a tmpfs of its own may hold (each costs the kernel memory no size counts)
INODES = {"/tmp": 65536, "/dev/shm": 65536}
OWN_INODES = 16384


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def visible_paths() -> list[str]:
    """What the worker reads: the interpreter, its prefixes, sys.path (not a project folder:
    only the kforge_nb package out of one), the system folders. Absolute, not resolved."""
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # (.../kforge_nb: this file is kforge_nb/evaluator/sandbox/root.py)
    paths = [p for p in SYSTEM_DIRS if os.path.lexists(p)]
    paths += [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
              os.path.dirname(os.path.abspath(sys.executable)),
              os.path.dirname(os.path.realpath(sys.executable)), package]
    prefixes = [os.path.realpath(p) for p in paths]
    cwd = os.getcwd()
    for entry in sys.path:
        if not entry or not os.path.exists(entry):
            continue
        entry = os.path.abspath(entry)
        real = os.path.realpath(entry)
        if any(_under(real, p) for p in prefixes):
            continue
        if real == os.path.dirname(os.path.realpath(package)) or real == cwd or (
                os.path.isdir(real) and any(os.path.lexists(os.path.join(real, m))
                                            for m in PROJECT_MARKERS)):
            continue                 # a project folder: its .env, other runs, its git history
        paths.append(entry)
    return list(dict.fromkeys(os.path.abspath(p) for p in paths))


def staging_point(needed: list[str]) -> str:
    for path in STAGING:
        if os.path.isdir(path) and not os.path.islink(path) and \
                not any(_under(n, path) for n in needed):
            return path
    raise OSError(0, "no folder to build the new root on")


def _mount_point(target: str, like: str) -> None:
    """An empty directory or file at `target`, for a bind of `like`."""
    if os.path.isdir(like):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.lexists(target):
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))


def _symlinks(root: str, path: str) -> None:
    """Recreate under `root` the symlinks on the way to `path` (/lib -> usr/lib)."""
    parts = path.strip("/").split("/")
    for i in range(1, len(parts) + 1):
        host = "/" + "/".join(parts[:i])
        if os.path.islink(host):
            mine = root + host
            if not os.path.lexists(mine):
                os.makedirs(os.path.dirname(mine), exist_ok=True)
                os.symlink(os.readlink(host), mine)
            return


def mount_flags(path: str) -> int:
    """The flags a bind remount of `path` must keep (the locked ones, in a user namespace)."""
    flag = os.statvfs(path).f_flag
    return sum(ms for st, ms in ST_TO_MS.items() if flag & st)


def _read_only(path: str, extra: int = MS_NOSUID | MS_NODEV) -> None:
    sys_mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | extra | mount_flags(path))


def private_under(path: str) -> bool:
    """Inside a folder the worker gets a private tmpfs of (its /tmp, its /dev/shm)."""
    return _under(path, "/tmp") or _under(path, "/dev/shm")


def new_root(spec: dict, new_proc: bool) -> tuple[str, str]:
    """Build the worker's root in a tmpfs, pivot into it, detach the host's. Returns the
    filesystem report and the private TMPDIR; raises OSError before the pivot if it cannot."""
    if platform.machine() not in PIVOT_ROOT:
        raise OSError(0, f"no pivot_root number for {platform.machine()}")
    private = {os.path.abspath(p): int(size) for p, size in (spec.get("private") or {}).items()}
    writable = [os.path.realpath(p) for p in spec["writable"]
                if os.path.abspath(p) not in private]
    tmp_bytes = int(spec.get("tmp_bytes") or TMP_CAP)
    visible = visible_paths()
    readable = [os.path.realpath(p) for p in spec.get("readable", []) if os.path.exists(p)]
    sources = sorted({os.path.realpath(p) for p in visible if os.path.exists(p)})
    binds = [s for i, s in enumerate(sources) if not any(_under(s, t) for t in sources[:i])]
    # what lies inside /tmp or /dev/shm (a clone in /tmp, its venv) is bound after the private
    # tmpfs that replace them, with the candidate's own folders
    late = [b for b in binds if private_under(b)]
    binds = [b for b in binds if not private_under(b)]
    root = staging_point(binds + late + readable + writable + list(private))
    link = _ExchangeLink(spec)           # the host's /dev/shm, held until the pivot is done
    try:
        sys_mount(None, "/", None, MS_REC | MS_PRIVATE)
        sys_mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=16m")
        for source in binds:
            _mount_point(root + source, source)
            sys_mount(source, root + source, None, MS_BIND | MS_REC)
        for path in visible:
            if not private_under(os.path.realpath(path)):
                _symlinks(root, path)
        new_proc = _system_views(root, tmp_bytes, new_proc)
        _own_folders(root, late, readable, writable, visible, list(private))
        _own_tmpfs(root, private)
        problem = "; ".join(filter(None, [_pivot(root), link.make()]))
    finally:
        link.close()
    return _lock_read_only(writable, private, new_proc, problem)


class _ExchangeLink:
    """The host's name of the memory exchange made a link into the worker's own tmpfs at the
    same path (sandbox.exchange_link), so the judge and your process, outside, read what the
    candidate wrote there. Made only once the pivot is done (the fallback keeps the host's
    folder); the host's /dev/shm is reached by a descriptor opened before, and closed at
    once: the candidate never holds a way back to the host's files."""

    def __init__(self, spec: dict):
        place = spec.get("memory_exchange")
        self.place, self.outer = place, spec.get("outer_pid")
        self.fd, self.problem = None, ""
        if place and self.outer and place in (spec.get("private") or {}):
            try:
                self.fd = os.open(os.path.dirname(place),
                                  os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError as err:
                self.problem = self.unreachable(err)

    @staticmethod
    def unreachable(err: OSError) -> str:
        return f"the memory exchange cannot be reached from outside ({err.strerror})"

    def make(self) -> str:
        """The link made; what went wrong, or ""."""
        if self.fd is None:
            return self.problem
        name = os.path.basename(self.place)
        try:
            try:
                made = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
            except FileNotFoundError:
                made = None
            if made is not None and stat.S_ISDIR(made.st_mode):
                shutil.rmtree(name, dir_fd=self.fd)     # the folder your process made for it
            elif made is not None:
                os.unlink(name, dir_fd=self.fd)
            os.symlink(exchange_link(self.outer, self.place), name, dir_fd=self.fd)
            return ""
        except OSError as err:
            return self.unreachable(err)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _system_views(root: str, tmp_bytes: int, new_proc: bool) -> bool:
    """Under the new root: the device nodes a kernel needs, a private /tmp and /dev/shm, /proc
    and /sys. Returns whether /proc is the new PID namespace's own."""
    # /dev: the nodes a kernel needs, a private /dev/shm
    dev = root + "/dev"
    os.makedirs(dev, exist_ok=True)
    sys_mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=64k")
    nodes = [f"/dev/{n}" for n in DEVICES] + \
        [p for g in GPU_DEVICES for p in sorted(glob.glob(f"/dev/{g}"))]
    for node in nodes:
        if os.path.exists(node):
            _mount_point(root + node, node)
            sys_mount(node, root + node, None, MS_BIND | MS_REC)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{dev}/{name}")
    for private in ("/dev/shm", "/tmp"):
        os.makedirs(root + private, exist_ok=True)
        sys_mount(TMPFS_TAG, root + private, "tmpfs", MS_NOSUID | MS_NODEV,
                  f"mode=1777,size={tmp_bytes},nr_inodes={INODES[private]}")
    # /proc of the new PID namespace (mounted while the host's is still visible, as a user
    # namespace must), /sys read-only
    os.makedirs(root + "/proc", exist_ok=True)
    if new_proc:
        try:
            sys_mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        except OSError:
            new_proc = False
    if not new_proc:
        sys_mount("/proc", root + "/proc", None, MS_BIND | MS_REC)
    if os.path.isdir("/sys"):
        os.makedirs(root + "/sys", exist_ok=True)
    return new_proc


def _own_folders(root: str, late: list[str], readable: list[str], writable: list[str],
                 visible: list[str], private: list[str]) -> None:
    # the candidate's own: its run folder and its cache. Folders on the way to one inside the
    # private /tmp or /dev/shm go on a small tmpfs of their own, made read-only with the rest
    # (there the worker could otherwise write beside them, or move them about)
    for path in late + readable + writable + private:
        for tmp in ("/tmp", "/dev/shm"):
            if path.startswith(tmp + "/") and path.count("/") > tmp.count("/") + 1:
                top = "/".join(path.split("/")[:tmp.count("/") + 2])
                if not os.path.ismount(root + top):
                    os.makedirs(root + top, exist_ok=True)
                    sys_mount("tmpfs", root + top, "tmpfs", MS_NOSUID | MS_NODEV,
                           "mode=755,size=64k")
    for path in late + readable:   # read-only (the pass below); its own folders on top
        _mount_point(root + path, path)
        sys_mount(path, root + path, None, MS_BIND | MS_REC)
    for path in visible:
        if private_under(os.path.realpath(path)):
            _symlinks(root, path)
    for path in writable:
        _mount_point(root + path, path)
        sys_mount(path, root + path, None, MS_BIND | MS_REC)
        sys_mount(None, root + path, None, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV |
               (mount_flags(root + path) & ~MS_RDONLY))


def _own_tmpfs(root: str, private: dict[str, int]) -> None:
    """A tmpfs of its own at each of these paths (HOME, the memory exchange), each capped at
    its size; on top of the folders bound there, so the host's stay as they were. A mount
    point cannot be renamed or removed: the exchange stays where the judge looks."""
    for path, size in private.items():
        os.makedirs(root + path, exist_ok=True)
        sys_mount(TMPFS_TAG, root + path, "tmpfs", MS_NOSUID | MS_NODEV,
                  f"mode=700,size={size},nr_inodes={OWN_INODES}")


def _pivot(root: str) -> str:
    """Into the new root; the host's is detached. Returns what went wrong, or ""."""
    # into it: the host's root goes
    os.chdir(root)
    if libc().syscall(ctypes.c_long(PIVOT_ROOT[platform.machine()]), b".", b".") != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"pivot_root: {os.strerror(errno)}")
    # from here on the new root is in place: a failure is reported, never a fallback
    detached = libc().umount2(b".", ctypes.c_int(MNT_DETACH)) == 0
    problem = "" if detached else \
        f"the host's root could not be detached ({os.strerror(ctypes.get_errno())})"
    os.chdir("/")
    return problem


def _lock_read_only(binds: list[str], private: dict[str, int], new_proc: bool,
                    problem: str) -> tuple[str, str]:
    # then everything read-only but its own folders and tmpfs, its /tmp, /proc and the devices
    writable = binds + list(private)
    left = []
    try:
        mounts = mount_points()
    except OSError as err:
        mounts, problem = [], f"no mount table to read ({err.strerror})"
    for mount, rw in mounts:
        if not rw or mount in ("/proc", "/tmp", "/dev/shm") or _under(mount, "/proc") or \
                any(_under(mount, w) for w in writable) or \
                (mount.startswith("/dev/") and not _under(mount, "/dev/shm")):
            continue
        try:
            _read_only(mount, 0 if mount == "/dev" else MS_NOSUID | MS_NODEV)
        except OSError as err:
            left.append(f"{mount} ({err.strerror})")
    still = [m for m, rw in (mount_points() if mounts else []) if rw and
             m not in ("/proc", "/tmp", "/dev/shm") and not _under(m, "/proc") and
             not any(_under(m, w) for w in writable) and not m.startswith("/dev/")]
    own = ", ".join(f"{path} ({size / 2**30:.2g} GiB)" for path, size in private.items())
    what = ("only the interpreter, its packages and the system folders visible, read-only; "
            "writable: " + ", ".join(binds) + (f"; tmpfs of its own: {own}" if own else "")
            + "; /proc of its own"
            + ("" if new_proc else " (not: the host's, bound)"))
    if still or problem:
        problem = problem or f"still writable: {', '.join(left[:5] or still[:5])}"
        return f"partly isolated: {problem}; {what}", "/tmp"
    return f"read-only outside its folder and its cache: {what}", "/tmp"


def read_only_outside(writable: list[str], new_proc: bool) -> str:
    """The fallback where no new root can be built: every mount read-only but its folders."""
    try:
        sys_mount(None, "/", None, MS_REC | MS_PRIVATE)
        for path in writable:
            Path(path).mkdir(parents=True, exist_ok=True)
            sys_mount(path, path, None, MS_BIND | MS_REC)
        for mount, _ in mount_points():
            if left_alone(mount, writable):
                continue
            try:
                sys_mount(None, mount, None, MS_BIND | MS_REMOUNT | MS_RDONLY | mount_flags(mount))
            except OSError:
                pass   # a mount we may not touch (already read-only, or locked)
        if new_proc:   # /proc for the new PID namespace: other processes disappear from it
            sys_mount("proc", "/proc", "proc", MS_NOSUID)
    except OSError as err:
        return f"not isolated: {err.strerror}"
    still = [m for m, rw in mount_points() if rw and not left_alone(m, writable)]
    if still:
        return f"partly isolated: still writable: {', '.join(still[:5])}"
    return ("partly isolated: read-only outside its folder and the kernel caches ("
            + ", ".join(writable) + "), but the whole file system is visible")


def left_alone(mount: str, writable: list[str]) -> bool:
    """A writable folder of the candidate's, or a kernel view (/dev, /proc, /sys) kept as is."""
    return mount in writable or any(mount == k or mount.startswith(k + "/") for k in KEEP_MOUNTS)


def _unescape(path: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)


def mount_table(pid: int | str = "self") -> list[tuple[str, bool, str, str]]:
    """(mount point, mounted read-write, file system type, source) of every mount process
    `pid` sees, its mount points as its root shows them."""
    rows = []
    with open(f"/proc/{pid}/mountinfo") as f:
        for line in f:
            mine, _, theirs = line.partition(" - ")
            fields, kind = mine.split(), theirs.split() + ["", ""]
            rows.append((_unescape(fields[4]), "rw" in fields[5].split(","), kind[0], kind[1]))
    return rows


def mount_points() -> list[tuple[str, bool]]:
    """(mount point, mounted read-write) for every mount this process sees."""
    return [(mount, rw) for mount, rw, _, _ in mount_table()]
