"""Parent-side handling of worker processes: start, talk, watch time and memory, kill.

Workers come from a fork server (zygote.py) that pre-imports torch once, so a new worker
costs a fork. Each worker leads its own process group; killing it also kills any compiler it
started. A worker that dies (signal, exit) or overruns its limits becomes a `WorkerFailure`
whose message says which.
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
from multiprocessing.connection import Connection

from .zygote import recv_message, send_message


class Zygote:
    """The parent's handle on the fork server: start it once, ask it for workers."""

    def __init__(self):
        from ..targets.triton import TritonTarget
        # Triton reads TRITON_INTERPRET when it is imported, and the zygote imports it (through
        # torch._dynamo), so the interpreter must be chosen here, for every worker.
        env = {**os.environ, **TritonTarget().worker_env()}
        self.sock, theirs = socket.socketpair()
        self.process = subprocess.Popen(
            [sys.executable, "-c", "import sys, socket; from kforge_nb.evaluator.zygote import "
             "serve; serve(socket.socket(fileno=int(sys.argv[1])))", str(theirs.fileno())],
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
                message = recv_message(self.sock)
            except (OSError, EOFError):
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

    def fork(self, function: str, job: dict) -> tuple[int, Connection]:
        ours, theirs = socket.socketpair()
        with self.lock:
            send_message(self.sock, (function, job), [theirs.fileno()])
            theirs.close()
            pid = self.pids.get(timeout=120)
        if pid is None:
            raise WorkerFailure("exit", "the kforge fork server died; see its output above")
        return pid, Connection(ours.detach())


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
    def __init__(self, kind: str, message: str):
        self.kind = kind            # "crash", "timeout", "out_of_memory", "exit"
        super().__init__(message)


def signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def rss_bytes(pid: int) -> int:
    """Resident memory of a process and its descendants (compilers included), from /proc."""
    total = 0
    try:
        pids = [pid] + [int(p) for p in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return 0
    for p in pids:
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            pass
    return total


class Worker:
    """One child process running `workers.<function>(conn, job)`; `recv()` enforces the deadline and memory cap."""

    def __init__(self, function: str, job: dict, timeout_s: float, memory_bytes: int):
        self.server = zygote()
        self.pid, self.conn = self.server.fork(function, job)
        self.deadline = time.monotonic() + timeout_s
        self.timeout_s, self.memory_bytes = timeout_s, memory_bytes
        self.peak_rss = 0

    def send(self, message) -> None:
        self.conn.send(message)

    def recv(self) -> dict:
        eof = False
        while True:
            if not eof and self.conn.poll(0.05):
                try:
                    return self.conn.recv()
                except EOFError:
                    eof = True   # the child is gone; its exit status says why
            code = self.server.exits.get(self.pid)
            if code is not None and (eof or not self.conn.poll(0)):
                if code < 0:
                    raise WorkerFailure("crash", f"the worker process was killed by "
                                        f"{signal_name(-code)}")
                raise WorkerFailure("exit", f"the worker process exited with code {code} "
                                    "before reporting")
            if eof:
                time.sleep(0.02)
            rss = rss_bytes(self.pid)
            self.peak_rss = max(self.peak_rss, rss)
            if rss > self.memory_bytes:
                self.kill()
                raise WorkerFailure("out_of_memory", f"the worker used {rss / 2**30:.2f} GiB of "
                                    f"memory, over the {self.memory_bytes / 2**30:.2f} GiB limit")
            if time.monotonic() > self.deadline:
                self.kill()
                raise WorkerFailure("timeout", f"no answer within {self.timeout_s:g} s "
                                    "(an infinite loop or a hang?)")

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
        try:
            if self.alive():
                self.conn.send("stop")
                self.wait(5)
        except (BrokenPipeError, OSError):
            pass
        if self.alive():
            self.kill()
        self.conn.close()


def default_memory_limit() -> int:
    """Half the machine's memory: leaves room for the notebook and the reference worker."""
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        return int(pages * 0.5)
    except (ValueError, OSError):
        return 8 * 2**30
