"""The sandbox a candidate worker runs in: no credentials, no network, no privilege, and a view
of the file system that holds only what it needs.

Model-written code is untrusted code. Before the candidate is imported, its worker:

* env: keeps an allow-list of variables (PATH, compiler, CUDA/ROCm/Triton/torch/OpenMP
  settings, KFORGE_*), never one that looks like a credential, and points HOME into its own
  folder and TMPDIR at its private /tmp;
* processes: gets a PID namespace of its own (Linux), so it cannot read another process's
  /proc/PID/environ (where the notebook's API key lives) and every process it starts dies with
  it;
* network: gets a network namespace with no interface up (Linux), so there is no route out;
* filesystem: gets a mount namespace whose root is a new, read-only tmpfs holding only the
  interpreter and its packages (the kforge_nb package, never the project folder around it),
  the system folders (/usr, /lib*, /bin, /sbin, /etc, /opt), /sys read-only, the device nodes
  a kernel needs, a /proc of its own PID namespace; writable: its run folder and a cache of its
  own, keyed by the candidate's text (only the same text ever reads what that text wrote). The
  host's root is detached (pivot_root), so a Unix socket, another run's folder, a `.env`, the
  shared cache (reference baselines, locks) or $HOME are not there to reach;
* tmp: /tmp and /dev/shm are fresh tmpfs, size-capped, that vanish with the worker;
* privileges: as root it becomes uid/gid 65534 with no groups and no capabilities; as an
  unprivileged user (in a user namespace) it drops every capability and empties the bounding
  set; then no_new_privs, so no setuid binary gives any back;
* syscalls: a seccomp filter refuses (EPERM) mount and the other mount API calls, pivot_root,
  chroot, setns, unshare, clone with namespace flags, ptrace, process_vm_*, bpf, keyrings,
  modules, kexec, reboot, swap, perf_event_open, userfaultfd, io_uring, open_by_handle_at;
  clone3 answers ENOSYS (its flags live in memory a filter cannot read) and libc falls back to
  clone. perf_event_open is refused too: Nsight Compute does not need it, `perf` would.

Each layer is tried separately and reported: what the host allowed and what it did not; a layer
that cannot be set up is reported, never fatal. On macOS only the environment is scrubbed.
`--no-sandbox` turns all of it off, loudly.
"""
from __future__ import annotations

import ctypes
import glob
import hashlib
import os
import platform
import re
import shutil
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
CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x02000000, 0x04000000, 0x08000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
MNT_DETACH = 2
# statvfs's f_flag bits, and the mount flags they stand for (a remount must keep the locked ones)
ST_TO_MS = {1: MS_RDONLY, 2: MS_NOSUID, 4: MS_NODEV, 8: MS_NOEXEC, 1024: MS_NOATIME,
            2048: MS_NODIRATIME, 4096: MS_RELATIME}
# Mounts the fallback (no new root) leaves as they are: devices, the kernel's views.
KEEP_MOUNTS = ("/dev", "/proc", "/sys")

NOBODY = 65534                       # the uid/gid a root worker becomes
TMP_CAP = 1 << 30                    # /tmp and /dev/shm: each at most this, or memory / 4
SYSTEM_DIRS = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/opt")
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
GPU_DEVICES = ("nvidia*", "nvidia-caps", "dri", "kfd")
# where the new root's tmpfs is mounted while it is built: a folder nobody needs to see
STAGING = ("/dev/shm", "/mnt", "/media", "/srv", "/tmp", "/run")
PROJECT_MARKERS = (".git", ".env", "pyproject.toml", "setup.py", "setup.cfg")
LAYERS = ("env", "network", "filesystem", "processes", "privileges", "syscalls", "tmp")


def is_credential(name: str) -> bool:
    return bool(CREDENTIAL.search(name))


def without_credentials(env: dict[str, str]) -> dict[str, str]:
    """The environment the fork server (and so every worker) starts from."""
    return {k: v for k, v in env.items() if not is_credential(k)}


def candidate_env(env: dict[str, str], home: Path, caches: dict[str, str],
                  tmp: str | None = None) -> dict[str, str]:
    kept = {k: v for k, v in env.items() if not is_credential(k) and
            (k in ALLOWED_NAMES or k.startswith(ALLOWED_PREFIXES))}
    return {**kept, **caches, "HOME": str(home), "TMPDIR": tmp or str(home / "tmp")}


def kernel_caches(env: dict[str, str]) -> dict[str, str]:
    """Cache folders named explicitly, so a redirected HOME does not throw compiled kernels away."""
    home = Path(env.get("HOME") or Path.home())
    kforge = env.get("KFORGE_CACHE") or str(home / ".cache" / "kforge-nb")
    return {"KFORGE_CACHE": kforge,
            "TRITON_CACHE_DIR": env.get("TRITON_CACHE_DIR") or str(home / ".triton" / "cache"),
            "CUDA_CACHE_PATH": env.get("CUDA_CACHE_PATH") or str(home / ".nv" / "ComputeCache"),
            "TORCH_EXTENSIONS_DIR": env.get("TORCH_EXTENSIONS_DIR") or
            str(home / ".cache" / "torch_extensions")}


def source_cache(folder: Path, source: str) -> Path:
    """The candidate's own cache: one per candidate text, inside the shared cache (which the
    candidate never sees). Without the text, a cache inside the run folder."""
    if not source:
        try:
            source = (folder / "candidate.py").read_text(errors="replace")
        except OSError:
            return folder / "sandbox" / ".cache"
    root = Path(kernel_caches(dict(os.environ))["KFORGE_CACHE"])
    return root / "sandboxed" / hashlib.sha256(source.encode(errors="replace")).hexdigest()[:24]


def memory_exchange(folder: Path) -> Path | None:
    """A folder in memory (/dev/shm) where the candidate's outputs can cross to the judge
    without going to disk and back (a 2 GiB output: 1.8 s to write there, 4.5 s to the run
    folder's exchange/ on this machine's disk), where the machine has one. One per run
    folder; the evaluation uses it where the outputs fit in memory, and removes it at the end."""
    shm = Path("/dev/shm")
    if sys.platform.startswith("linux") and shm.is_dir() and os.access(shm, os.W_OK):
        name = hashlib.sha256(str(Path(folder).resolve()).encode()).hexdigest()[:16]
        return shm / f"kforge-exchange-{name}"
    return None


def make_memory_exchange(folder: Path) -> Path | None:
    """The memory exchange, made for this process (its pid in `.owner`), after removing those
    of processes that ended without removing theirs (killed: a 2 GiB output left in /dev/shm
    is 2 GiB of memory gone until reboot)."""
    place = memory_exchange(folder)
    if place is None:
        return None
    for stale in place.parent.glob("kforge-exchange-*"):
        try:
            owner = int((stale / ".owner").read_text())
            os.kill(owner, 0)
        except ProcessLookupError:
            shutil.rmtree(stale, ignore_errors=True)
        except (OSError, ValueError):
            pass                     # another user's, or one being made: not ours to judge
    place.mkdir(mode=0o700, exist_ok=True)
    (place / ".owner").write_text(str(os.getpid()))
    return place


def exchanges(folder: Path) -> list[Path]:
    """The folders the candidate's outputs may be written to: the run folder's exchange/, and
    the one in memory where there is one."""
    memory = memory_exchange(folder)
    return [Path(folder) / "exchange"] + ([memory] if memory else [])


def plan(folder: Path, enabled: bool, source: str = "", memory_bytes: int | None = None,
         data_files: list[str] = ()) -> dict:
    """What the worker will set up (decided in the parent, carried out in the child).
    `data_files`: files the problem itself reads (a notebook's saved inputs), shown read-only."""
    if not enabled:
        return {"enabled": False}
    folder = Path(folder).resolve()      # the worker changes directory into its home
    home = folder / "sandbox"
    cache = source_cache(folder, source)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        cache = cache.resolve()
    except OSError:                      # an unwritable shared cache: one in the run folder
        cache = folder / "sandbox" / ".cache"
    caches = {"KFORGE_CACHE": str(cache), "TRITON_CACHE_DIR": str(cache / "triton"),
              "CUDA_CACHE_PATH": str(cache / "nv"),
              "TORCH_EXTENSIONS_DIR": str(cache / "torch_extensions")}
    tmp_bytes = TMP_CAP if not memory_bytes else max(64 << 20, min(TMP_CAP, memory_bytes // 4))
    # writable: its HOME, the exchange folder its outputs go to, its cache; the run folder
    # itself only readable (weights.pt): your process writes result.json and the logs there,
    # and a link the candidate planted beside them would be followed
    return {"enabled": True, "home": str(home), "folder": str(folder), "cache": str(cache),
            "caches": caches, "readable": [str(folder), *map(str, data_files)],
            "writable": [str(home), *map(str, exchanges(folder)), str(cache)],
            "exchanges": [str(p) for p in exchanges(folder)],
            "tmp_bytes": tmp_bytes}


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


def _mount(source: str | None, target: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    if libc().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags),
                    enc(data)) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {target}: {os.strerror(errno)}")


def _prctl(option: int, *args: int) -> int:
    values = [ctypes.c_ulong(a) for a in args] + [ctypes.c_ulong(0)] * (4 - len(args))
    result = libc().prctl(ctypes.c_int(option), *values)
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl({option}): {os.strerror(errno)}")
    return result


def enter_namespaces(spec: dict) -> dict:
    """Step 1, in the worker's first process: new namespaces. The caller forks next, and the
    child (PID 1 of the new PID namespace) calls `finish`. Returns the report so far."""
    report = {"enabled": spec.get("enabled", False)}
    if not report["enabled"]:
        off = "the sandbox is off (--no-sandbox)"
        for key in ("env", "network", "filesystem", "processes", "tmp"):
            report[key] = f"not isolated: {off}"
        report.update(privileges=f"not dropped: {off}", syscalls=f"not filtered: {off}")
        return report
    if not sys.platform.startswith("linux"):
        report.update(network=f"not isolated: no network namespaces on {sys.platform}",
                      filesystem=f"not isolated: no mount namespaces on {sys.platform}",
                      processes=f"not isolated: no PID namespaces on {sys.platform}",
                      tmp=f"not isolated: the shared temporary folders of {sys.platform}",
                      privileges=f"not dropped: no capabilities to drop on {sys.platform}",
                      syscalls=f"not filtered: no seccomp on {sys.platform}")
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
            report["user_namespace"] = f"created (uid {uid} maps to itself)"
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
            report["tmp"] = (f"private: /tmp and /dev/shm are fresh tmpfs of "
                             f"{spec.get('tmp_bytes', TMP_CAP) / 2**30:.2g} GiB each, gone with "
                             "the worker")
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


# --- the file system ----------------------------------------------------------------------------


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
    _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | extra | mount_flags(path))


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
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=16m")
    for source in binds:
        _mount_point(root + source, source)
        _mount(source, root + source, None, MS_BIND | MS_REC)
    for path in visible:
        if not private_under(os.path.realpath(path)):
            _symlinks(root, path)
    # /dev: the nodes a kernel needs, a private /dev/shm
    dev = root + "/dev"
    os.makedirs(dev, exist_ok=True)
    _mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=64k")
    nodes = [f"/dev/{n}" for n in DEVICES] + \
        [p for g in GPU_DEVICES for p in sorted(glob.glob(f"/dev/{g}"))]
    for node in nodes:
        if os.path.exists(node):
            _mount_point(root + node, node)
            _mount(node, root + node, None, MS_BIND | MS_REC)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{dev}/{name}")
    size = f"mode=1777,size={tmp_bytes}"
    for private in ("/dev/shm", "/tmp"):
        os.makedirs(root + private, exist_ok=True)
        _mount("tmpfs", root + private, "tmpfs", MS_NOSUID | MS_NODEV, size)
    # /proc of the new PID namespace (mounted while the host's is still visible, as a user
    # namespace must), /sys read-only
    os.makedirs(root + "/proc", exist_ok=True)
    if new_proc:
        try:
            _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        except OSError:
            new_proc = False
    if not new_proc:
        _mount("/proc", root + "/proc", None, MS_BIND | MS_REC)
    if os.path.isdir("/sys"):
        os.makedirs(root + "/sys", exist_ok=True)
        _mount("/sys", root + "/sys", None, MS_BIND | MS_REC)
    # the candidate's own: its run folder and its cache. Folders on the way to one inside the
    # private /tmp or /dev/shm go on a small tmpfs of their own, made read-only with the rest
    # (there the worker could otherwise write beside them, or move them about)
    for path in late + readable + writable:
        for private in ("/tmp", "/dev/shm"):
            if path.startswith(private + "/") and path.count("/") > private.count("/") + 1:
                top = "/".join(path.split("/")[:private.count("/") + 2])
                if not os.path.ismount(root + top):
                    os.makedirs(root + top, exist_ok=True)
                    _mount("tmpfs", root + top, "tmpfs", MS_NOSUID | MS_NODEV,
                           "mode=755,size=64k")
    for path in late + readable:   # read-only (the pass below); its own folders on top
        _mount_point(root + path, path)
        _mount(path, root + path, None, MS_BIND | MS_REC)
    for path in visible:
        if private_under(os.path.realpath(path)):
            _symlinks(root, path)
    for path in writable:
        _mount_point(root + path, path)
        _mount(path, root + path, None, MS_BIND | MS_REC)
        _mount(None, root + path, None, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV |
               (mount_flags(root + path) & ~MS_RDONLY))
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
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        for path in writable:
            Path(path).mkdir(parents=True, exist_ok=True)
            _mount(path, path, None, MS_BIND | MS_REC)
        for mount, _ in mount_points():
            if left_alone(mount, writable):
                continue
            try:
                _mount(None, mount, None, MS_BIND | MS_REMOUNT | MS_RDONLY | mount_flags(mount))
            except OSError:
                pass   # a mount we may not touch (already read-only, or locked)
        if new_proc:   # /proc for the new PID namespace: other processes disappear from it
            _mount("proc", "/proc", "proc", MS_NOSUID)
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


# --- privileges ---------------------------------------------------------------------------------

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
            _prctl(PR_CAPBSET_DROP, cap)
        except OSError:
            break


def _drop_capabilities() -> None:
    """Bounding set emptied, then no capability at all."""
    _drop_bounding_set()
    try:
        _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
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
                _prctl(PR_SET_DUMPABLE, 1)     # its own /proc/self stays its own
                said.append(f"uid {NOBODY}")
            except OSError as err:             # e.g. 65534 not mapped in this container
                _drop_capabilities()
                said.append(f"uid 0 (could not become {NOBODY}: {err.strerror})")
        else:
            _drop_capabilities()
            said.append(f"uid {os.geteuid()}" + (" in a user namespace" if user_ns else ""))
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
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


# --- the syscall filter -------------------------------------------------------------------------

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
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
CLONE, CLONE3 = {"x86_64": 56, "aarch64": 220}, 435
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
    calls get EPERM; clone with a namespace flag EPERM; clone3 ENOSYS."""
    column = 0 if arch == "x86_64" else 1
    code: list[tuple] = [(LD_ABS_W, 0, 0, 4),                        # arch
                         (JEQ, 0, "deny", AUDIT_ARCH[arch]),
                         (LD_ABS_W, 0, 0, 0)]                        # syscall number
    if arch == "x86_64":
        code.append((JGE, "deny", 0, 0x40000000))                    # the x32 ABI
    code += [(JEQ, "deny", 0, numbers[column]) for numbers in REFUSED.values()]
    code += [(JEQ, "enosys", 0, CLONE3), (JEQ, "clone", 0, CLONE[arch]), (RET, 0, 0, RET_ALLOW)]
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
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
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
            "with namespace flags); clone3 answers ENOSYS")


def summary(report: dict) -> str:
    """One line for a verdict's message."""
    if not report.get("enabled"):
        return "SANDBOX OFF: the candidate ran with your environment, network and files"
    weak = [k for k in LAYERS if str(report.get(k, "")).startswith(("not", "partly"))]
    return "sandboxed" + (f" (not isolated here: {', '.join(weak)})" if weak else "")
