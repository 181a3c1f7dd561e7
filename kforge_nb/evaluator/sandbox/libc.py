"""The system calls the sandbox makes through libc (ctypes): unshare, mount, prctl, and the
kernel's numbers for their flags. Each raises OSError with the call's errno."""
from __future__ import annotations

import ctypes
import os

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x10000000, 0x20000000, 0x40000000
CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x02000000, 0x04000000, 0x08000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
MNT_DETACH = 2

_libc = None


def libc():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def sys_call(name: str, *args) -> None:
    if getattr(libc(), name)(*args) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{name}: {os.strerror(errno)}")


def sys_unshare(flags: int) -> None:
    sys_call("unshare", ctypes.c_int(flags))


def sys_mount(source: str | None, target: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    if libc().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags),
                    enc(data)) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {target}: {os.strerror(errno)}")


def sys_prctl(option: int, *args: int) -> int:
    values = [ctypes.c_ulong(a) for a in args] + [ctypes.c_ulong(0)] * (4 - len(args))
    result = libc().prctl(ctypes.c_int(option), *values)
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl({option}): {os.strerror(errno)}")
    return result
