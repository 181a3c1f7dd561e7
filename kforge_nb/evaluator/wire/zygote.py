"""A fork server: one process that imports torch once and forks a fresh worker per request.

Why not multiprocessing's forkserver: it re-runs the caller's `__main__` in every child, which
breaks scripts without a `__main__` guard and costs time. This one knows nothing of the caller.

Protocol over a Unix socket (the parent holds the other end), JSON frames (wire/framing.py):
  parent -> zygote: [function name, job] with two file descriptors attached: the
                    child's end of a fresh connection to the parent, and the write end of
                    the pipe its stdout/stderr go to (the parent caps and keeps the log)
  zygote -> parent: ["pid", pid] once forked; ["exit", pid, status] when a child ends
The zygote exits when the parent closes the socket.
"""
from __future__ import annotations

import os
import select
import signal
import socket
import sys

from .framing import Channel, close_other_fds, recv, send


def run_child(function: str, job: dict, conn_fd: int, log_fd: int) -> None:
    """The worker: its own process group, output to the parent's log pipe, the sandbox."""
    from ..sandbox import child
    os.setsid()  # own process group: the parent can kill compilers we start along with us
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    # nothing else inherited: not the fork server's socket or files, not the terminal
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    close_other_fds(keep=(conn_fd,))
    spec = job.get("sandbox") or {}
    report = child.enter_namespaces(spec) if spec else {}
    if str(report.get("processes", "")).startswith("isolated"):
        become_init(conn_fd)
    code = 0
    try:
        if spec:
            job["sandbox_report"] = child.finish(spec, report)
        from ..worker import entry
        getattr(entry, function)(Channel(conn_fd), job)
    except BaseException:  # the parent reads the log and the exit status
        import traceback
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def become_init(conn_fd: int) -> None:
    """In a new PID namespace: fork PID 1 (a tiny init that reaps) and the worker under it.

    The first process stays outside as the parent's handle and exits the way the worker did;
    when PID 1 exits the kernel kills everything left in the namespace, so nothing the
    candidate started outlives it. Returns only in the worker."""
    status_r, status_w = os.pipe()
    if os.fork():                                   # outside: mirror the worker's end
        os.close(conn_fd)
        os.close(status_w)
        os.wait()
        data = os.read(status_r, 64)
        mirror(int(data) if data else 1 << 8)
    worker = os.fork()
    if worker:                                      # PID 1: reap until the worker ends
        os.close(conn_fd)
        os.close(status_r)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        status = 1 << 8
        while True:
            try:
                pid, wait_status = os.wait()
            except ChildProcessError:
                break
            if pid == worker:
                status = wait_status
                break
        os.write(status_w, str(status).encode())
        os._exit(0)
    os.close(status_r)
    os.close(status_w)


def mirror(status: int) -> None:
    """Exit as a process with wait status `status` did (same code, or same signal)."""
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)


_compile_warm = False


def warm_compile() -> None:
    """torch.compile's start-up, paid once here rather than by every judge forked after it:
    Inductor's modules, the hashes of torch's and Triton's sources its cache keys take, the
    CPU's vector ISA (probed by compiling), all through one tiny compile that dynamo then
    forgets (each judge compiles the reference afresh; torch's on-disk cache already held
    its code). Measured on 2 busy cores: a softmax reference's compile in a forked judge,
    23.5 s cold, 0.5 s after this. One compile thread: no pool started, safe to fork."""
    global _compile_warm
    if _compile_warm:
        return
    _compile_warm = True
    try:
        import torch
        import torch._inductor.config as inductor
        with torch.no_grad(), inductor.patch(compile_threads=1):
            torch.compile(lambda x: torch.softmax(x * 2.0, dim=-1))(torch.ones(4, 8))
        torch._dynamo.reset()
    except Exception:        # nothing lost: the judge compiles cold, as it did before
        pass


def serve(sock: socket.socket) -> None:
    from ..worker import entry  # noqa: F401  (the point of this process: torch imported once)
    # Ctrl-C in a terminal or "interrupt kernel" in Jupyter signals the whole process group:
    # that is the caller's to handle; the fork server carries on (and ends with its socket).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    children: set[int] = set()
    send(sock, ("ready", os.getpid()))
    while True:
        readable, _, _ = select.select([sock], [], [], 0.05)
        if readable:
            request, fds = recv(sock, with_fds=True)
            if request is None:
                break
            function, job = request
            if job.get("warm_compile"):          # a judge that will torch.compile
                warm_compile()
            pid = os.fork()
            if pid == 0:
                sock.close()
                run_child(function, job, fds[0], fds[1])
            for fd in fds:
                os.close(fd)
            children.add(pid)
            send(sock, ("pid", pid))
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                send(sock, ("exit", pid, os.waitstatus_to_exitcode(status)))
    for pid in children:
        try:
            os.killpg(pid, 9)
        except OSError:
            pass

