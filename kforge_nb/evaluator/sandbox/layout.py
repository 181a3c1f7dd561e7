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
  a kernel needs, a /proc of its own PID namespace; writable: the run folder's exchange/ (for
  outputs too large for memory) and a cache of its own, keyed by the candidate's text (only
  the same text ever reads what that text wrote), both on disk and capped. The host's root is
  detached (pivot_root), so a Unix socket, another run's folder, a `.env`, the shared cache
  (reference baselines, locks) or $HOME are not there to reach;
* tmp: /tmp, /dev/shm, its HOME and the memory exchange its outputs cross in are tmpfs of its
  own, each size-capped, that vanish with the worker (the judge reads the exchange through
  /proc/PID/root, by a link in the host's /dev/shm that only names it). What the HOME held is
  kept beside the run's artifacts, a few small regular files, copied by your process;
* memory: one cap counts everything it holds: its processes' resident pages, shared mappings
  included, and swap, plus what it wrote into its own tmpfs; memory that no process maps and
  no such tmpfs holds cannot be made (memfd_create, SysV shared memory and message queues
  answer ENOSYS);
* privileges: as root it becomes uid/gid 65534 with no groups and no capabilities; as an
  unprivileged user (in a user namespace) it drops every capability and empties the bounding
  set; then no_new_privs, so no setuid binary gives any back;
* syscalls: a seccomp filter refuses (EPERM) mount and the other mount API calls, pivot_root,
  chroot, setns, unshare, clone with namespace flags, ptrace, process_vm_*, bpf, keyrings,
  modules, kexec, reboot, swap, perf_event_open, userfaultfd, io_uring, open_by_handle_at;
  clone3 answers ENOSYS (its flags live in memory a filter cannot read) and libc falls back to
  clone, as do the makers of unseen memory above. perf_event_open is refused too: Nsight
  Compute does not need it, `perf` would.

Each layer is tried separately and reported: what the host allowed and what it did not; a layer
that cannot be set up is reported, never fatal. On macOS only the environment is scrubbed.
`--no-sandbox` turns all of it off, loudly.

This module is the parent's side: the plan (decided here, carried out in the child), the
environment's allow-list, the caches and exchange folders, the one-line summary. The caps as
your process checks them, and what outlives the worker: sandbox/usage.py. The child's side:
sandbox/child.py (the steps), sandbox/root.py (the file system), sandbox/privileges.py
(privileges and seccomp), sandbox/libc.py (the system calls).
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
from pathlib import Path

from . import safe_open

CREDENTIAL = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
ALLOWED_NAMES = {"PATH", "LANG", "LANGUAGE", "TERM", "TZ", "USER", "LOGNAME", "SHELL",
                 "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH",
                 "CPLUS_INCLUDE_PATH", "PKG_CONFIG_PATH", "CC", "CXX", "NVCC", "CFLAGS",
                 "CXXFLAGS", "LDFLAGS", "VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH",
                 "PYTHONHASHSEED", "SYSTEMROOT"}
ALLOWED_PREFIXES = ("LC_", "CUDA", "NVIDIA_", "NCCL_", "ROCM", "HIP_", "HSA_", "TRITON_",
                    "TORCH", "PYTORCH_", "OMP_", "MKL_", "KMP_", "OPENBLAS_", "GOMP_",
                    "KFORGE_", "XLA_", "MPS", "METAL_")

TMP_CAP = 1 << 30                    # /tmp, /dev/shm, HOME: each at most this, or memory / 4
CACHE_CAP = 1 << 30                  # a candidate text's kernel cache on disk (more: removed)
TMPFS_TAG = "kforge-sandbox"         # the source name of the worker's own tmpfs mounts
LAYERS = ("env", "network", "filesystem", "processes", "privileges", "syscalls", "tmp", "memory")


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
    """Where the candidate's outputs cross to the judge in memory (/dev/shm), not to disk and
    back (a 2 GiB output: 1.8 s to write there, 4.5 s to the run folder's exchange/ on this
    machine's disk), where the machine has one. One name per run folder; the evaluation uses
    it where the outputs fit in memory. Sandboxed, the candidate writes into a tmpfs of its
    own mounted there in its namespace, and the name on the host is a link into it
    (`exchange_link`); unsandboxed, it is a folder of the host's, removed at the end."""
    shm = Path("/dev/shm")
    if sys.platform.startswith("linux") and shm.is_dir() and os.access(shm, os.W_OK):
        name = hashlib.sha256(str(Path(folder).resolve()).encode()).hexdigest()[:16]
        return shm / f"kforge-exchange-{name}"
    return None


def exchange_link(pid: int, place: str | Path) -> str:
    """What the host's name of a memory exchange points to while the sandboxed worker `pid`
    (the process your process started) holds it: the tmpfs at the same path in its root."""
    return f"/proc/{pid}/root{place}"


def linked_pid(place: Path) -> int | None:
    """The worker whose exchange the link `place` names (None: not such a link)."""
    match = re.fullmatch(r"/proc/(\d+)/root/.*", os.readlink(place))
    return int(match.group(1)) if match else None


def exchange_owner(place: Path) -> int | None:
    """The process an exchange belongs to: the worker a link names, or the process in a
    folder's `.owner`, read as a file a candidate may have replaced (a FIFO, a link, a sparse
    terabyte) is read: without waiting, following or reading more than a pid. None: unknown."""
    try:
        if place.is_symlink():
            return linked_pid(place)
        return int(safe_open.read_regular(place / ".owner", 32))
    except (OSError, ValueError):
        return None


def make_memory_exchange(folder: Path) -> Path | None:
    """The memory exchange, made for this process (its pid in `.owner`), after removing those
    of processes that ended without removing theirs (killed: a 2 GiB output left in /dev/shm
    is 2 GiB of memory gone until reboot)."""
    place = memory_exchange(folder)
    if place is None:
        return None
    for stale in place.parent.glob("kforge-exchange-*"):
        owner = exchange_owner(stale) if owned_by_us(stale) else None
        if owner is None:
            # another user's (/dev/shm is shared and sticky: removing it would fail, and did
            # for a user beside root's runs), one being made, or unreadable: not ours
            continue
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            remove_exchange(stale)
        except OSError:
            pass
    place.mkdir(mode=0o700, exist_ok=True)
    (place / ".owner").write_text(str(os.getpid()))
    return place


def owned_by_us(place: Path) -> bool:
    """Whether this user owns the link or folder itself (not what it points to)."""
    try:
        return place.lstat().st_uid == os.geteuid()
    except OSError:
        return False


def remove_exchange(place: Path) -> None:
    """A memory exchange gone: the link, or the folder and what is in it."""
    if place.is_symlink():
        place.unlink(missing_ok=True)
    else:
        shutil.rmtree(place, ignore_errors=True)


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
    memory = memory_bytes or TMP_CAP            # its memory cap (the worker's)
    tmp_bytes = max(64 << 20, min(TMP_CAP, memory // 4))
    in_memory = memory_exchange(folder)
    # tmpfs of its own (bytes each): its HOME, and the exchange its outputs cross in memory
    private = {str(home): tmp_bytes, **({str(in_memory): memory} if in_memory else {})}
    # on disk, capped (your process walks them): its cache, the exchange for outputs too large
    # for memory (at most what it holds), and HOME or the memory exchange where no tmpfs of its
    # own could be mounted
    disk = [["its kernel cache", str(cache), CACHE_CAP],
            ["the exchange for large outputs", str(folder / "exchange"), memory],
            ["its HOME", str(home), tmp_bytes]] + \
        ([["the memory exchange", str(in_memory), memory]] if in_memory else [])
    # writable: its HOME, the exchange folders its outputs go to, its cache (HOME and the memory
    # exchange as tmpfs of its own, where they can be mounted); the run folder itself only
    # readable (weights.pt): your process writes result.json and the logs there, and a link
    # the candidate planted beside them would be followed
    return {"enabled": True, "home": str(home), "folder": str(folder), "cache": str(cache),
            "caches": caches, "readable": [str(folder), *map(str, data_files)],
            "writable": [str(home), *map(str, exchanges(folder)), str(cache)],
            "exchanges": [str(p) for p in exchanges(folder)],
            "memory_exchange": str(in_memory) if in_memory else None,
            "private": private, "disk_caps": disk, "memory_bytes": memory,
            "tmp_bytes": tmp_bytes}


def one_line(report: dict) -> str:
    """One line for a verdict's message."""
    if not report.get("enabled"):
        return "SANDBOX OFF: the candidate ran with your environment, network and files"
    weak = [k for k in LAYERS if str(report.get(k, "")).startswith(("not", "partly"))]
    return "sandboxed" + (f" (not isolated here: {', '.join(weak)})" if weak else "")
