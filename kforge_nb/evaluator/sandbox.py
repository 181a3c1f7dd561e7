"""The sandbox a candidate worker runs in: no credentials, no network, nothing writable outside.

Model-written code is untrusted code. Before the candidate is imported, its worker:

* environment: keeps an allow-list of variables (PATH, compiler, CUDA/ROCm/Triton/torch/OpenMP
  settings, KFORGE_*), never one that looks like a credential, and points HOME and TMPDIR into
  its own folder;
* processes: gets a PID namespace of its own (Linux), so it cannot read another process's
  /proc/PID/environ (where the notebook's API key lives) and every process it starts dies with
  it;
* network: gets a network namespace with no interface up (Linux), so there is no route out;
* filesystem: gets a mount namespace in which every mount is read-only except its own folder
  and the kernel caches (kforge's, Triton's, CUDA's, torch extensions').

Each layer is tried separately and reported: what the host allowed and what it did not. On
macOS only the environment is scrubbed. `--no-sandbox` turns all of it off, loudly.
"""
from __future__ import annotations

import ctypes
import os
import re
import sys
from pathlib import Path

CREDENTIAL = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
ALLOWED_NAMES = {"PATH", "LANG", "LANGUAGE", "TERM", "TZ", "USER", "LOGNAME", "SHELL",
                 "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH",
                 "CPLUS_INCLUDE_PATH", "PKG_CONFIG_PATH", "CC", "CXX", "NVCC", "CFLAGS",
                 "CXXFLAGS", "LDFLAGS", "VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH",
                 "PYTHONHASHSEED", "SYSTEMROOT"}
ALLOWED_PREFIXES = ("LC_", "CUDA", "NVIDIA_", "NCCL_", "ROCM", "HIP_", "HSA_", "TRITON_",
                    "TORCH", "PYTORCH_", "OMP_", "MKL_", "KMP_", "OPENBLAS_", "GOMP_",
                    "KFORGE_", "XLA_", "MPS", "METAL_")

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 32, 4096, 16384, 1 << 18
# Mounts that stay as they are: devices (GPU nodes, shared memory), the kernel's views.
KEEP_MOUNTS = ("/dev", "/proc", "/sys")


def is_credential(name: str) -> bool:
    return bool(CREDENTIAL.search(name))


def without_credentials(env: dict[str, str]) -> dict[str, str]:
    """The environment the fork server (and so every worker) starts from."""
    return {k: v for k, v in env.items() if not is_credential(k)}


def candidate_env(env: dict[str, str], home: Path, caches: dict[str, str]) -> dict[str, str]:
    kept = {k: v for k, v in env.items() if not is_credential(k) and
            (k in ALLOWED_NAMES or k.startswith(ALLOWED_PREFIXES))}
    return {**kept, **caches, "HOME": str(home), "TMPDIR": str(home / "tmp")}


def kernel_caches(env: dict[str, str]) -> dict[str, str]:
    """Cache folders named explicitly, so a redirected HOME does not throw compiled kernels away."""
    home = Path(env.get("HOME") or Path.home())
    kforge = env.get("KFORGE_CACHE") or str(home / ".cache" / "kforge-nb")
    return {"KFORGE_CACHE": kforge,
            "TRITON_CACHE_DIR": env.get("TRITON_CACHE_DIR") or str(home / ".triton" / "cache"),
            "CUDA_CACHE_PATH": env.get("CUDA_CACHE_PATH") or str(home / ".nv" / "ComputeCache"),
            "TORCH_EXTENSIONS_DIR": env.get("TORCH_EXTENSIONS_DIR") or
            str(home / ".cache" / "torch_extensions")}


def plan(folder: Path, enabled: bool) -> dict:
    """What the worker will set up (decided in the parent, carried out in the child)."""
    if not enabled:
        return {"enabled": False}
    folder = Path(folder).resolve()      # the worker changes directory into its home
    home = folder / "sandbox"
    caches = kernel_caches(dict(os.environ))
    return {"enabled": True, "home": str(home), "caches": caches,
            "writable": [str(folder)] + sorted(set(caches.values()))}


# --- in the child -------------------------------------------------------------------------------

_libc = None


def libc():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _call(name: str, *args) -> None:
    if getattr(libc(), name)(*args) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{name}: {os.strerror(errno)}")


def _unshare(flags: int) -> None:
    _call("unshare", ctypes.c_int(flags))


def _mount(source: str | None, target: str, fstype: str | None, flags: int) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    _call("mount", enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), None)


def enter_namespaces(spec: dict) -> dict:
    """Step 1, in the worker's first process: new namespaces. The caller forks next, and the
    child (PID 1 of the new PID namespace) calls `finish`. Returns the report so far."""
    report = {"enabled": spec.get("enabled", False)}
    if not report["enabled"]:
        for key in ("env", "network", "filesystem", "processes"):
            report[key] = "not isolated: the sandbox is off (--no-sandbox)"
        return report
    if not sys.platform.startswith("linux"):
        report.update(network=f"not isolated: no network namespaces on {sys.platform}",
                      filesystem=f"not isolated: no mount namespaces on {sys.platform}",
                      processes=f"not isolated: no PID namespaces on {sys.platform}")
        return report
    uid, gid = os.geteuid(), os.getegid()
    user_ns = False
    if uid != 0:   # an unprivileged user needs a user namespace before the others
        try:
            _unshare(CLONE_NEWUSER)
            Path("/proc/self/setgroups").write_text("deny")
            Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
            Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
            user_ns = True
        except OSError as err:
            report["user_namespace"] = f"unavailable ({err.strerror})"
    for key, flag, done in (("network", CLONE_NEWNET, "isolated: a network namespace with no "
                             "interface up"),
                            ("filesystem", CLONE_NEWNS, ""),
                            ("processes", CLONE_NEWPID, "isolated: a PID namespace of its own "
                             "(no other process visible; children die with the worker)")):
        try:
            _unshare(flag)
            report[key] = done or "mount namespace"
        except OSError as err:
            hint = "" if user_ns or uid == 0 else " (unprivileged; no user namespace either)"
            report[key] = f"not isolated: {err.strerror}{hint}"
    return report


def finish(spec: dict, report: dict) -> dict:
    """Step 2, in the process that will run the candidate: mounts, environment, folder."""
    if not spec.get("enabled"):
        return report
    home = Path(spec["home"])
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    if report.get("filesystem") == "mount namespace":
        report["filesystem"] = read_only_outside(spec["writable"] + [str(home)],
                                                 report.get("processes", "").startswith("isolated"))
    env = candidate_env(dict(os.environ), home, spec["caches"])
    removed = sorted(k for k in os.environ if k not in env)
    credentials = [k for k in removed if is_credential(k)]
    os.environ.clear()
    os.environ.update(env)
    import tempfile
    tempfile.tempdir = None      # the fork server may have cached /tmp: ask TMPDIR again
    report["env"] = (f"allow-list: {len(env)} variables kept, {len(removed)} removed"
                     + (f" (credentials among them: {', '.join(credentials)})" if credentials
                        else "") + f"; HOME and TMPDIR in {home}")
    os.chdir(home)
    return report


def read_only_outside(writable: list[str], new_proc: bool) -> str:
    try:
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        for path in writable:
            Path(path).mkdir(parents=True, exist_ok=True)
            _mount(path, path, None, MS_BIND | MS_REC)
        for mount, _ in mount_points():
            if left_alone(mount, writable):
                continue
            try:
                _mount(None, mount, None, MS_BIND | MS_REMOUNT | MS_RDONLY)
            except OSError:
                pass   # a mount we may not touch (already read-only, or locked)
        if new_proc:   # /proc for the new PID namespace: other processes disappear from it
            _mount("proc", "/proc", "proc", MS_NOSUID)
    except OSError as err:
        return f"not isolated: {err.strerror}"
    still = [m for m, rw in mount_points() if rw and not left_alone(m, writable)]
    if still:
        return f"partly isolated: still writable: {', '.join(still[:5])}"
    return "read-only outside its folder and the kernel caches (" + ", ".join(writable) + ")"


def left_alone(mount: str, writable: list[str]) -> bool:
    """A writable folder of the candidate's, or a kernel view (/dev, /proc, /sys) kept as is."""
    return mount in writable or any(mount == k or mount.startswith(k + "/") for k in KEEP_MOUNTS)


def mount_points() -> list[tuple[str, bool]]:
    """(mount point, mounted read-write) for every mount this process sees."""
    with open("/proc/self/mountinfo") as f:
        return [(fields[4].replace("\\040", " "), "rw" in fields[5].split(","))
                for fields in (line.split() for line in f)]


def summary(report: dict) -> str:
    """One line for a verdict's message."""
    if not report.get("enabled"):
        return "SANDBOX OFF: the candidate ran with your environment, network and files"
    weak = [k for k in ("env", "network", "filesystem", "processes")
            if str(report.get(k, "")).startswith(("not", "partly"))]
    return "sandboxed" + (f" (not isolated here: {', '.join(weak)})" if weak else "")
