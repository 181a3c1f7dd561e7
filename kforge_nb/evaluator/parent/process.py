"""Parent-side handling of worker processes: start, talk, watch time and memory, kill.

Workers come from a fork server (zygote.py) that pre-imports torch once, so a new worker
costs a fork. Each worker leads its own process group; killing it also kills any compiler it
started. A worker that dies (signal, exit) or overruns its limits becomes a `WorkerFailure`
whose message says which. A sandboxed worker's memory also counts its own tmpfs, and its
folders on disk have caps of their own (sandbox/usage.py).
"""
from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time

from ..sandbox import usage
from ..wire.framing import Channel, ProtocolError, recv, send


def available_memory() -> int:
    """The host memory the kernel says can still be had (MemAvailable)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 1 << 62


# OpenMP threads (torch's and a candidate's) wait at a region's end by sleeping, not spinning:
# on a busy machine a spinning thread burns the slices its preempted sibling needs, and the
# region lasts until that sibling gets a core back. Measured (benchmarks/noise.py, a tanh
# kernel and one 1.3x slower, 2 pinned cores beside two busy loops, 2x10 judgings each): the
# spread of a kernel's speedup (p90/p10) 2.86 -> 1.62, idle unchanged (1.31 -> 1.25, same
# median). Read when OpenMP loads, so set for the fork server; yours wins where you set one.
OPENMP = {"OMP_WAIT_POLICY": "PASSIVE"}


# How long a request for a worker waits on a live fork server (see Zygote.next_pid).
FORK_WAIT_S = 600.0


class Zygote:
    """The parent's handle on the fork server: start it once, ask it for workers."""

    def __init__(self):
        from ...targets.triton import TritonTarget
        from ..sandbox.layout import without_credentials
        # Triton reads TRITON_INTERPRET when it is imported, and the zygote imports it (through
        # torch._dynamo), so the interpreter must be chosen here, for every worker. No
        # credential enters it: a forked worker could read its start-up environment from
        # /proc/self/environ whatever os.environ says later.
        env = without_credentials({**OPENMP, **os.environ, **TritonTarget().worker_env()})
        self.sock, theirs = socket.socketpair()
        self.process = subprocess.Popen(
            [sys.executable, "-c", "import sys, socket; from kforge_nb.evaluator.wire.zygote "
             "import serve; serve(socket.socket(fileno=int(sys.argv[1])))", str(theirs.fileno())],
            pass_fds=[theirs.fileno()], env=env)
        theirs.close()
        self.lock = threading.Lock()
        self.pids: queue.Queue = queue.Queue()
        self.exits: dict[int, int] = {}
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True, name="kforge-zygote").start()

    def _read(self) -> None:
        while True:
            try:
                message = recv(self.sock)
            except (OSError, EOFError, ProtocolError):
                message = None
            if message is None:
                self.pids.put(None)
                return
            if message[0] == "ready":
                self.ready.set()
            elif message[0] == "pid":
                self.pids.put(message[1])
            elif message[0] == "exit":
                self.exits[message[1]] = message[2]

    def alive(self) -> bool:
        return self.process.poll() is None

    def fork(self, function: str, job: dict, log_fd: int) -> tuple[int, Channel]:
        ours, theirs = socket.socketpair()
        with self.lock:
            send(self.sock, (function, job), [theirs.fileno(), log_fd])
            theirs.close()
            pid = self.next_pid()
        if pid is None:
            raise WorkerFailure("exit", "the kforge fork server died; see its output above")
        return pid, Channel(ours)

    def next_pid(self) -> int | None:
        """The pid of the worker just asked for (None: the server died). The server answers
        once it has imported torch, which on a machine whose cores are all taken can take
        minutes (a bench run beside a busy test suite waited past 2 minutes): wait while it
        lives, FORK_WAIT_S at most. A server that never answers is stopped, so that a late
        pid can never be taken as the next worker's."""
        deadline = time.monotonic() + FORK_WAIT_S
        while time.monotonic() < deadline:
            try:
                return self.pids.get(timeout=1.0)
            except queue.Empty:
                if not self.alive():
                    return self.pids.get_nowait() if not self.pids.empty() else None
        self.process.kill()
        raise WorkerFailure("timeout", f"the kforge fork server started no worker within "
                                       f"{FORK_WAIT_S:g} s (are the machine's cores all taken?)")


_ZYGOTE: Zygote | None = None
_ZYGOTE_LOCK = threading.Lock()


def zygote() -> Zygote:
    """The fork server, started on first use (call early to overlap its start-up with work)."""
    global _ZYGOTE
    with _ZYGOTE_LOCK:
        if _ZYGOTE is None or not _ZYGOTE.alive():
            _ZYGOTE = Zygote()
        return _ZYGOTE


class WorkerFailure(Exception):
    def __init__(self, kind: str, message: str, log_tail: str = ""):
        # "crash", "timeout", "out_of_memory", "out_of_space", "exit", "protocol"
        self.kind = kind
        self.log_tail = log_tail    # the end of the worker's log: what it said last
        super().__init__(message)


def signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def descendants(pid: int) -> list[int]:
    """A process and all its descendants (compilers, a sandbox's init and worker), from /proc."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        try:
            tasks = os.listdir(f"/proc/{p}/task")    # a child forked from any thread counts
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split() if int(c) not in found]
            except (OSError, ValueError):
                pass
    return found


HELD = ("RssAnon", "RssShmem", "VmSwap")       # in /proc/PID/status: what counts against the cap
STATUS_KIB = (*HELD, "VmHWM")


def memory(pid: int) -> tuple[int, int]:
    """(the memory a process tree holds, what its cap is checked against: resident anonymous
    pages, resident shared ones (a MAP_SHARED mapping, a tmpfs file mapped) and swap, summed
    over its processes; the largest VmHWM in it, libraries included, so a peak between two
    samples is not missed). A sandbox's outer processes share the worker's pages: the peak is
    a maximum, not a sum."""
    held = peak = 0
    for p in descendants(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                kib = {k: v for k, v in (line.split(":", 1) for line in f) if k in STATUS_KIB}
            held += sum(int(kib.get(k, "0 kB").split()[0]) << 10 for k in HELD)
            peak = max(peak, int(kib.get("VmHWM", "0 kB").split()[0]) << 10)
        except (OSError, ValueError):
            pass
    return held, peak


class LogSink:
    """Reads a worker's stdout/stderr from a pipe into its log file, capped: the first
    `head` bytes and the last `tail` bytes are kept, what lies between is counted."""

    def __init__(self, path: str, head: int = 1 << 20, tail: int = 1 << 20):
        self.path, self.head, self.tail = path, head, tail
        self.read_fd, self.write_fd = os.pipe()
        self.kept_tail = bytearray()
        self.dropped = 0
        self.thread = threading.Thread(target=self._pump, daemon=True, name="kforge-log")
        self.thread.start()

    def _pump(self) -> None:
        written = 0
        with open(self.path, "ab") as log:
            while True:
                try:
                    chunk = os.read(self.read_fd, 1 << 16)
                except OSError:
                    break
                if not chunk:
                    break
                if written < self.head:
                    part = chunk[:self.head - written]
                    log.write(part)
                    log.flush()
                    written += len(part)
                    chunk = chunk[len(part):]
                self.kept_tail += chunk
                if len(self.kept_tail) > self.tail:
                    self.dropped += len(self.kept_tail) - self.tail
                    del self.kept_tail[:len(self.kept_tail) - self.tail]
            if self.dropped:
                log.write(f"\n[... {self.dropped} bytes of output dropped: the log keeps the "
                          f"first {self.head} and the last {self.tail} bytes ...]\n".encode())
            log.write(bytes(self.kept_tail))
        os.close(self.read_fd)

    def close(self, wait_s: float = 5.0) -> None:
        """Wait for the writers to be gone (end of file) and the log to be complete."""
        self.thread.join(wait_s)

    def text_tail(self, chars: int = 1500) -> str:
        self.close(2.0)
        try:
            text = open(self.path, errors="replace").read()[-chars:].strip()
        except OSError:
            return "(no log)"
        return text or "(empty)"


class Worker:
    """One child process running `entry.<function>(conn, job)` (worker/entry.py); `recv()`
    enforces the deadline and memory cap."""

    def __init__(self, function: str, job: dict, timeout_s: float, memory_bytes: int):
        self.server = zygote()
        self.log = LogSink(job["log"])
        try:
            self.pid, self.conn = self.server.fork(function, job, self.log.write_fd)
        finally:
            os.close(self.log.write_fd)   # the worker holds the only write end now
        self.deadline = time.monotonic() + timeout_s
        self.timeout_s, self.memory_bytes = timeout_s, memory_bytes
        self.peak_rss = 0
        self.sandbox = job.get("sandbox") or {}
        self.watch = usage.Watch(self.sandbox, self.pid)

    def held(self) -> int:
        """The memory it holds against its cap: its processes', and its own tmpfs'."""
        held, peak = memory(self.pid)
        self.peak_rss = max(self.peak_rss, peak)
        return held + self.watch.in_tmpfs()

    def send(self, message) -> None:
        self.conn.send(message)

    def recv(self) -> dict:
        eof = False
        first = True          # every reply waits for a look at its folders on disk too
        while True:
            self.within_caps(first)
            first = False
            if not eof and self.conn.poll(0.05):
                try:
                    message = self.frame()
                    self.watch.settle()
                    return message
                except EOFError:
                    eof = True   # the child is gone; its exit status says why
            code = self.server.exits.get(self.pid)
            if code is not None and (eof or not self.conn.poll(0)):
                if code < 0:
                    raise WorkerFailure("crash", f"the worker process was killed by "
                                        f"{signal_name(-code)}", self.log.text_tail())
                raise WorkerFailure("exit", f"the worker process exited with code {code} "
                                    "before reporting", self.log.text_tail())
            if eof:
                time.sleep(0.02)
            if time.monotonic() > self.deadline:
                self.kill()
                raise WorkerFailure("timeout", f"no answer within {self.timeout_s:g} s "
                                    "(an infinite loop or a hang?)", self.log.text_tail())

    def within_caps(self, walk: bool) -> None:
        """Its folders on disk and its memory under their caps, else it is killed and the
        failure says which (`walk`: its folders looked at now, not only when due)."""
        full = self.watch.disk_over(now=walk)
        if full:
            self.kill()
            raise WorkerFailure("out_of_space", f"the worker {full}", self.log.text_tail())
        held = self.held()
        if held > self.memory_bytes:
            self.kill()
            raise WorkerFailure("out_of_memory", f"the worker used {held / 2**30:.2f} GiB of "
                                f"memory, over the {self.memory_bytes / 2**30:.2f} GiB limit "
                                "(its processes, shared mappings included, and its own tmpfs)",
                                self.log.text_tail())

    def frame(self) -> dict:
        """The frame that has begun to arrive: whole within the deadline, a JSON object."""
        self.conn.sock.settimeout(max(0.05, self.deadline - time.monotonic()))
        try:
            value = self.conn.recv()
        except (socket.timeout, TimeoutError):
            self.kill()
            raise WorkerFailure("timeout", f"a message begun but not finished within "
                                f"{self.timeout_s:g} s", self.log.text_tail()) from None
        except ProtocolError as err:
            self.kill()
            raise WorkerFailure("protocol", f"protocol violation: {err}",
                                self.log.text_tail()) from None
        except ConnectionResetError:
            # it died with a command of ours unread: a closed end, as EOF is (its exit
            # status says why), never an OSError out of the evaluation
            raise EOFError from None
        finally:
            if self.conn.sock.fileno() >= 0:
                self.conn.sock.settimeout(None)
        if not isinstance(value, dict):
            self.kill()
            raise WorkerFailure("protocol", "protocol violation: a reply that is not a JSON "
                                f"object ({type(value).__name__})", self.log.text_tail())
        return value

    def extend(self, seconds: float) -> None:
        self.deadline = max(self.deadline, time.monotonic() + seconds)

    def alive(self) -> bool:
        return self.pid not in self.server.exits

    def wait(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while self.alive() and time.monotonic() < end:
            time.sleep(0.01)

    def kill(self) -> None:
        for kill in (lambda: os.killpg(self.pid, signal.SIGKILL),
                     lambda: os.kill(self.pid, signal.SIGKILL)):
            try:
                kill()
            except (ProcessLookupError, PermissionError):
                pass
        self.wait(5)

    def close(self) -> None:
        """Stopped (killed after 5 s), what its sandbox held kept or removed (sandbox/usage.py)."""
        try:
            if self.alive():
                usage.keep_home(self.sandbox, self.pid)
                self.conn.send(("stop",))
                self.wait(5)
        except (BrokenPipeError, OSError):
            pass
        if self.alive():
            self.kill()
        self.conn.close()
        self.log.close()
        usage.tidy(self.sandbox, self.pid)


def default_memory_limit() -> int:
    """Half the machine's memory: leaves room for the notebook and the reference worker."""
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        return int(pages * 0.5)
    except (ValueError, OSError):
        return 8 * 2**30
