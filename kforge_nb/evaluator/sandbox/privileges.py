"""The candidate worker's privileges and system calls: root becomes nobody (65534), anyone else
drops every capability and empties the bounding set, then no_new_privs; a seccomp filter refuses
the calls that would undo the sandbox (mount, namespaces, ptrace, bpf, ...) and answers ENOSYS
to those that make memory no cap can see."""
from __future__ import annotations

import ctypes
import os
import platform
from pathlib import Path

from .libc import (CLONE_NEWCGROUP, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID,
                   CLONE_NEWUSER, CLONE_NEWUTS, libc, sys_prctl)

NOBODY = 65534                       # the uid/gid a root worker becomes
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 4, 24, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _chown_tree(path: str) -> None:
    if not path or not os.path.exists(path) or os.stat(path).st_uid == NOBODY:
        return
    os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
    for parent, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chown(os.path.join(parent, name), NOBODY, NOBODY, follow_symlinks=False)


def _drop_bounding_set() -> None:
    """Every capability out of the bounding set, where CAP_SETPCAP allows."""
    try:
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        last = 40
    for cap in range(last + 1):
        try:
            sys_prctl(PR_CAPBSET_DROP, cap)
        except OSError:
            break


def _drop_capabilities() -> None:
    """Bounding set emptied, then no capability at all."""
    _drop_bounding_set()
    try:
        sys_prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError:
        pass
    header = _CapHeader(0x20080522, 0)            # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    if libc().capset(ctypes.byref(header), data) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"capset: {os.strerror(errno)}")


def _capabilities() -> dict[str, int]:
    with open("/proc/self/status") as f:
        return {k: int(v, 16) for k, v in (line.split(":", 1) for line in f)
                if k in ("CapEff", "CapPrm", "CapBnd", "CapAmb")}


def drop_privileges(own: list[str], user_ns: bool) -> str:
    """Root becomes nobody (65534) after chowning what it must write; anyone else drops every
    capability. Then no_new_privs. Returns the report line."""
    said = []
    try:
        if os.geteuid() == 0 and not user_ns:
            try:
                for path in own:
                    _chown_tree(path)
                _drop_bounding_set()
                os.setgroups([])
                os.setresgid(NOBODY, NOBODY, NOBODY)
                os.setresuid(NOBODY, NOBODY, NOBODY)
                sys_prctl(PR_SET_DUMPABLE, 1)     # its own /proc/self stays its own
                said.append(f"uid {NOBODY}")
            except OSError as err:             # e.g. 65534 not mapped in this container
                _drop_capabilities()
                said.append(f"uid 0 (could not become {NOBODY}: {err.strerror})")
        else:
            _drop_capabilities()
            said.append(f"uid {os.geteuid()}" + (" in a user namespace" if user_ns else ""))
        sys_prctl(PR_SET_NO_NEW_PRIVS, 1)
    except OSError as err:
        return f"not dropped: {err}"
    try:
        caps = _capabilities()
    except (OSError, ValueError):
        caps = {}
    if caps.get("CapEff") or caps.get("CapPrm"):
        return f"partly dropped: {', '.join(said)}, capabilities still held ({caps})"
    said.append("no capabilities" + ("" if caps.get("CapBnd") else " (bounding set empty)"))
    return "dropped: " + ", ".join(said) + ", no_new_privs"


AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
SECCOMP_NR = {"x86_64": 317, "aarch64": 277}
REFUSED = {   # name: (x86_64, aarch64)
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51),
    "setns": (308, 268), "unshare": (272, 97), "ptrace": (101, 117),
    "process_vm_readv": (310, 270), "process_vm_writev": (311, 271), "bpf": (321, 280),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "init_module": (175, 105), "finit_module": (313, 273), "delete_module": (176, 106),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294), "reboot": (169, 142),
    "swapon": (167, 224), "swapoff": (168, 225), "acct": (163, 89),
    "open_by_handle_at": (304, 265), "name_to_handle_at": (303, 264),
    "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    "open_tree": (428, 428), "move_mount": (429, 429), "fsopen": (430, 430),
    "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "mount_setattr": (442, 442), "pidfd_getfd": (438, 438), "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426), "io_uring_register": (427, 427), "quotactl": (179, 60),
}
# Calls that answer ENOSYS, as where the kernel lacks them, so that libraries take their
# fallbacks: clone3 (its flags live in memory a filter cannot read; libc falls back to clone),
# and the makers of memory held by no process's mappings and no file system of the sandbox's
# own (a memfd written and never mapped, a SysV segment detached, a message queue's kernel
# buffers): no cap would count them. Their fallbacks (shm_open in /dev/shm) land in a tmpfs of
# its own, which is counted.
UNAVAILABLE = {"clone3": (435, 435), "memfd_create": (319, 279), "memfd_secret": (447, 447),
               "shmget": (29, 194), "msgget": (68, 186)}
CLONE = {"x86_64": 56, "aarch64": 220}
NAMESPACE_FLAGS = (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER
                   | CLONE_NEWPID | CLONE_NEWNET)
EPERM, ENOSYS = 1, 38
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
LD_ABS_W, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def seccomp_program(arch: str) -> list[tuple[int, int, int, int]]:
    """The BPF program: (code, jt, jf, k). Wrong architecture, x32 numbers and the refused
    calls get EPERM; clone with a namespace flag EPERM; the unavailable calls ENOSYS."""
    column = 0 if arch == "x86_64" else 1
    code: list[tuple] = [(LD_ABS_W, 0, 0, 4),                        # arch
                         (JEQ, 0, "deny", AUDIT_ARCH[arch]),
                         (LD_ABS_W, 0, 0, 0)]                        # syscall number
    if arch == "x86_64":
        code.append((JGE, "deny", 0, 0x40000000))                    # the x32 ABI
    code += [(JEQ, "deny", 0, numbers[column]) for numbers in REFUSED.values()]
    code += [(JEQ, "enosys", 0, numbers[column]) for numbers in UNAVAILABLE.values()]
    code += [(JEQ, "clone", 0, CLONE[arch]), (RET, 0, 0, RET_ALLOW)]
    labels = {"clone": len(code)}
    code += [(LD_ABS_W, 0, 0, 16),                                   # args[0], low 32 bits
             (JSET, "deny", 0, NAMESPACE_FLAGS), (RET, 0, 0, RET_ALLOW)]
    labels["deny"] = len(code)
    code.append((RET, 0, 0, RET_ERRNO | EPERM))
    labels["enosys"] = len(code)
    code.append((RET, 0, 0, RET_ERRNO | ENOSYS))
    at = lambda i, j: j if isinstance(j, int) else labels[j] - i - 1  # noqa: E731
    return [(c, at(i, jt), at(i, jf), k) for i, (c, jt, jf, k) in enumerate(code)]


def filter_syscalls() -> str:
    arch = platform.machine()
    if arch not in AUDIT_ARCH:
        return f"not filtered: no syscall table for {arch}"
    program = seccomp_program(arch)
    filters = (_SockFilter * len(program))(*[_SockFilter(*i) for i in program])
    prog = _SockFprog(len(program), filters)
    try:
        sys_prctl(PR_SET_NO_NEW_PRIVS, 1)
        # every thread (TSYNC); where seccomp(2) is missing, prctl for this one
        if libc().syscall(ctypes.c_long(SECCOMP_NR[arch]), ctypes.c_long(1), ctypes.c_long(1),
                          ctypes.byref(prog)) != 0:
            if libc().prctl(ctypes.c_int(22), ctypes.c_ulong(2), ctypes.byref(prog),
                            ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
                errno = ctypes.get_errno()
                raise OSError(errno, os.strerror(errno))
    except OSError as err:
        return f"not filtered: seccomp refused ({err.strerror or err})"
    names = list(REFUSED)
    return (f"filtered: {len(names) + 1} calls refused ({', '.join(names[:8])}, ..., and clone "
            f"with namespace flags); {', '.join(UNAVAILABLE)} answer ENOSYS")
