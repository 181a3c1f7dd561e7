"""The candidate worker's file system, set up in its mount namespace: a new root on a tmpfs
holding only the interpreter, its packages, the system folders, the device nodes a kernel
needs, its own /proc, /tmp and /dev/shm; writable only its own folders; the host's root
detached (pivot_root). Where no new root can be built, the fallback: every mount read-only but
its folders (the whole file system still visible, and said so)."""
from __future__ import annotations

import ctypes
import glob
import os
import platform
import re
import sys
from pathlib import Path

from .sandbox import TMP_CAP
from .sandbox_libc import (MNT_DETACH, MS_BIND, MS_NOATIME, MS_NODEV, MS_NODIRATIME, MS_NOEXEC,
                           MS_NOSUID, MS_PRIVATE, MS_RDONLY, MS_REC, MS_RELATIME, MS_REMOUNT,
                           libc, sys_mount)

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


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def visible_paths() -> list[str]:
    """What the worker reads: the interpreter, its prefixes, sys.path (not a project folder:
    only the kforge_nb package out of one), the system folders. Absolute, not resolved."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # .../kforge_nb
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
    writable = [os.path.realpath(p) for p in spec["writable"]]
    tmp_bytes = int(spec.get("tmp_bytes") or TMP_CAP)
    visible = visible_paths()
    readable = [os.path.realpath(p) for p in spec.get("readable", []) if os.path.exists(p)]
    sources = sorted({os.path.realpath(p) for p in visible if os.path.exists(p)})
    binds = [s for i, s in enumerate(sources) if not any(_under(s, t) for t in sources[:i])]
    # what lies inside /tmp or /dev/shm (a clone in /tmp, its venv) is bound after the private
    # tmpfs that replace them, with the candidate's own folders
    late = [b for b in binds if private_under(b)]
    binds = [b for b in binds if not private_under(b)]
    root = staging_point(binds + late + readable + writable)
    sys_mount(None, "/", None, MS_REC | MS_PRIVATE)
    sys_mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=16m")
    for source in binds:
        _mount_point(root + source, source)
        sys_mount(source, root + source, None, MS_BIND | MS_REC)
    for path in visible:
        if not private_under(os.path.realpath(path)):
            _symlinks(root, path)
    new_proc = _system_views(root, tmp_bytes, new_proc)
    _own_folders(root, late, readable, writable, visible)
    problem = _pivot(root)
    return _lock_read_only(writable, new_proc, problem)


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
    size = f"mode=1777,size={tmp_bytes}"
    for private in ("/dev/shm", "/tmp"):
        os.makedirs(root + private, exist_ok=True)
        sys_mount("tmpfs", root + private, "tmpfs", MS_NOSUID | MS_NODEV, size)
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
                 visible: list[str]) -> None:
    # the candidate's own: its run folder and its cache. Folders on the way to one inside the
    # private /tmp or /dev/shm go on a small tmpfs of their own, made read-only with the rest
    # (there the worker could otherwise write beside them, or move them about)
    for path in late + readable + writable:
        for private in ("/tmp", "/dev/shm"):
            if path.startswith(private + "/") and path.count("/") > private.count("/") + 1:
                top = "/".join(path.split("/")[:private.count("/") + 2])
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


def _lock_read_only(writable: list[str], new_proc: bool, problem: str) -> tuple[str, str]:
    # then everything read-only but its own folders, its /tmp, /proc and the device nodes
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
    what = ("only the interpreter, its packages and the system folders visible, read-only; "
            "writable: " + ", ".join(writable) + "; /proc of its own"
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


def mount_points() -> list[tuple[str, bool]]:
    """(mount point, mounted read-write) for every mount this process sees."""
    with open("/proc/self/mountinfo") as f:
        return [(_unescape(fields[4]), "rw" in fields[5].split(","))
                for fields in (line.split() for line in f)]
