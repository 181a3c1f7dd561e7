"""The sandbox as the candidate's worker enters it (wire/zygote.py calls both steps): new
namespaces in its first process, then in the process that runs the candidate the new root
(root.py), privileges dropped and the syscall filter (privileges.py), the environment's
allow-list and its home. Each layer is tried separately and reported; a layer that fails is
never fatal."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from .layout import TMP_CAP, candidate_env, is_credential
from .libc import (CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWUSER, sys_prctl,
                   sys_unshare)
from .privileges import PR_SET_DUMPABLE, drop_privileges, filter_syscalls
from .root import new_root, read_only_outside


def enter_namespaces(spec: dict) -> dict:
    """Step 1, in the worker's first process: new namespaces. The caller forks next, and the
    child (PID 1 of the new PID namespace) calls `finish`. Returns the report so far."""
    report = {"enabled": spec.get("enabled", False)}
    # the process your process knows (and the judge reads the memory exchange through)
    spec["outer_pid"] = os.getpid()
    if not report["enabled"]:
        off = "the sandbox is off (--no-sandbox)"
        for key in ("env", "network", "filesystem", "processes", "tmp"):
            report[key] = f"not isolated: {off}"
        report.update(privileges=f"not dropped: {off}", syscalls=f"not filtered: {off}",
                      memory=f"partly capped: its processes' memory only ({off})")
        return report
    if not sys.platform.startswith("linux"):
        report.update(network=f"not isolated: no network namespaces on {sys.platform}",
                      filesystem=f"not isolated: no mount namespaces on {sys.platform}",
                      processes=f"not isolated: no PID namespaces on {sys.platform}",
                      tmp=f"not isolated: the shared temporary folders of {sys.platform}",
                      privileges=f"not dropped: no capabilities to drop on {sys.platform}",
                      syscalls=f"not filtered: no seccomp on {sys.platform}",
                      memory=f"not capped: no /proc to read on {sys.platform}")
        return report
    uid, gid = os.geteuid(), os.getegid()
    user_ns = False
    if uid != 0:   # an unprivileged user needs a user namespace before the others
        try:
            sys_unshare(CLONE_NEWUSER)
            Path("/proc/self/setgroups").write_text("deny")
            Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
            Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
            # new credentials made it undumpable: your process (the same user, outside) could
            # no longer read its /proc/PID/root, where the memory exchange and its tmpfs lie
            sys_prctl(PR_SET_DUMPABLE, 1)
            user_ns = True
            report["user_namespace"] = f"created (uid {uid} maps to itself)"
        except OSError as err:
            report["user_namespace"] = f"unavailable ({err.strerror})"
    for key, flag, done in (("network", CLONE_NEWNET, "isolated: a network namespace with no "
                             "interface up"),
                            ("filesystem", CLONE_NEWNS, ""),
                            ("processes", CLONE_NEWPID, "isolated: a PID namespace of its own "
                             "(no other process visible; children die with the worker)")):
        try:
            sys_unshare(flag)
            report[key] = done or "mount namespace"
        except OSError as err:
            hint = "" if user_ns or uid == 0 else " (unprivileged; no user namespace either)"
            report[key] = f"not isolated: {err.strerror}{hint}"
    try:     # SysV IPC of its own: nothing it made there outlives it
        sys_unshare(CLONE_NEWIPC)
        spec["ipc"] = True
    except OSError:
        pass
    return report


def finish(spec: dict, report: dict) -> dict:
    """Step 2, in the process that will run the candidate: the new root, privileges dropped,
    the syscall filter, environment, folder. Never raises: what failed is in the report."""
    if not spec.get("enabled"):
        return report
    home = Path(spec["home"])
    folder = Path(spec.get("folder") or home.parent)
    writable = list(spec["writable"])
    tmp = None
    linux = sys.platform.startswith("linux")
    outputs = spec.get("exchanges") or [str(folder / "exchange")]
    for path in [home / "tmp", *map(Path, outputs), *map(Path, writable)]:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError:
            pass
    if report.get("filesystem") == "mount namespace":
        new_proc = report.get("processes", "").startswith("isolated")
        try:
            report["filesystem"], tmp = new_root(spec, new_proc)
            report["tmp"] = (f"private: /tmp, /dev/shm and its HOME are fresh tmpfs of "
                             f"{spec.get('tmp_bytes', TMP_CAP) / 2**30:.2g} GiB each, the "
                             "memory exchange one of its own, gone with the worker")
        except (OSError, ValueError) as err:   # the host's root stays: read-only instead
            why = getattr(err, "strerror", None) or err
            report["filesystem"] = read_only_outside(writable + [str(home)], new_proc)
            report["filesystem"] += f" (no new root: {why})"
            report["tmp"] = f"not isolated: no private /tmp ({why})"
    elif linux:
        report["tmp"] = "not isolated: no mount namespace for a private /tmp"
    if linux:
        report["privileges"] = drop_privileges(
            [str(home), *outputs, spec.get("cache", "")],
            report.get("user_namespace", "").startswith("created"))
        report["syscalls"] = filter_syscalls()
    report["memory"] = memory_line(spec, report)
    env = candidate_env(dict(os.environ), home, spec["caches"], tmp)
    removed = sorted(k for k in os.environ if k not in env)
    credentials = [k for k in removed if is_credential(k)]
    os.environ.clear()
    os.environ.update(env)
    import tempfile
    tempfile.tempdir = None      # the fork server may have cached /tmp: ask TMPDIR again
    report["env"] = (f"allow-list: {len(env)} variables kept, {len(removed)} removed"
                     + (f" (credentials among them: {', '.join(credentials)})" if credentials
                        else "") + f"; HOME in {home}, TMPDIR {env['TMPDIR']}")
    os.chdir(home)
    return report


def memory_line(spec: dict, report: dict) -> str:
    """What the memory cap (your process checks it) counts here, and what no cap could see."""
    counted = "its processes' resident memory, shared mappings included, and swap"
    own = str(report.get("tmp", "")).startswith("private")
    unseen = str(report.get("syscalls", "")).startswith("filtered")
    counted += (", and what it wrote into its own tmpfs (/tmp, /dev/shm, HOME, the memory "
                "exchange)" if own else "; not what it writes in the host's /tmp and /dev/shm")
    counted += ("; memfd_create, SysV shared memory and message queues unavailable" if unseen
                else "; memory made by memfd_create or SysV calls is not counted")
    counted += "; SysV IPC of its own" if spec.get("ipc") else ""
    capped = "capped" if own and unseen else "partly capped"
    return f"{capped} at {spec.get('memory_bytes', 0) / 2**30:.3g} GiB: {counted}"
