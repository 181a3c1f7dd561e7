"""`--workers N`: N evaluation worker processes on this host.

Each worker is a Python process running the evaluator (worker_main.py); with several GPUs each
is pinned to one (CUDA_VISIBLE_DEVICES), so N candidates compile, run and time at once, one per
GPU. Workers that share a device (one CPU, more workers than GPUs) still time one at a time:
the evaluator's timing lock is held across processes (evaluator/parent/device_lock.py).
Workers start without credentials and write their own output to `worker-K.log` under `log_dir`.
"""
from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
from multiprocessing.connection import Connection
from pathlib import Path

from ..evaluator.parent.process import signal_name
from ..evaluator.sandbox.layout import without_credentials
from ..runtime.native import cache_dir
from . import Executor, worker_lost


def visible_gpus() -> list[str]:
    """The CUDA devices this process may use, as CUDA_VISIBLE_DEVICES entries."""
    import torch
    if not torch.cuda.is_available():
        return []
    listed = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
              if d.strip()]
    return listed or [str(i) for i in range(torch.cuda.device_count())]


class WorkerLost(Exception):
    pass


class WorkerProcess:
    """One worker process, started on first use and again after it died."""

    def __init__(self, index: int, gpu: str | None, log_dir: Path):
        self.index, self.gpu, self.log_dir = index, gpu, log_dir
        self.process: subprocess.Popen | None = None
        self.conn: Connection | None = None

    @property
    def name(self) -> str:
        return f"local-{self.index}" + (f" (GPU {self.gpu})" if self.gpu is not None else "")

    def start(self) -> None:
        env = without_credentials(dict(os.environ))
        if self.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.gpu
        ours, theirs = socket.socketpair()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / f"worker-{self.index}.log", "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "kforge_nb.executors.worker_main", str(theirs.fileno())],
                pass_fds=[theirs.fileno()], env=env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=log)
        theirs.close()
        self.conn = Connection(ours.detach())

    def evaluate(self, job: tuple, progress=None):
        if self.process is None or self.process.poll() is not None:
            self.start()
        try:
            self.conn.send(job)
            kind, value = self.conn.recv()
            while kind == "step":          # a step of the judging ended: said as it comes
                if progress is not None:
                    progress(value)
                kind, value = self.conn.recv()
        except (EOFError, OSError) as err:
            raise WorkerLost(self.lost(err)) from None
        if kind == "raise":
            raise value
        value.worker = self.name
        return value

    def lost(self, err: Exception) -> str:
        try:
            code = self.process.wait(timeout=10)
            how = f"was killed by {signal_name(-code)}" if code < 0 else f"exited ({code})"
        except subprocess.TimeoutExpired:
            self.process.kill()
            how = f"stopped answering ({type(err).__name__}); killed"
        self.close()
        return f"worker {self.name} {how}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.process = self.conn = None


class LocalWorkers(Executor):
    name = "local workers"
    reports_progress = True       # each worker sends the evaluator's steps as they end

    def __init__(self, count: int, log_dir: str | Path | None = None,
                 gpus: list[str] | None = None):
        gpus = visible_gpus() if gpus is None else gpus
        log_dir = Path(log_dir) if log_dir else cache_dir() / "workers"
        self.workers = [WorkerProcess(i, gpus[i % len(gpus)] if gpus else None, log_dir)
                        for i in range(count)]
        self.slots = count
        self.idle: queue.Queue[WorkerProcess] = queue.Queue()
        for worker in self.workers:
            self.idle.put(worker)

    def evaluate(self, problem, code, target, options, folder, progress=None):
        job = (problem, code, target.name, options, folder)
        causes = []
        for _ in range(2):                 # the first try, and one re-queue
            worker = self.idle.get()
            try:
                return worker.evaluate(job, progress)
            except WorkerLost as lost:
                causes.append(str(lost))
            finally:
                self.idle.put(worker)
        return worker_lost("local", causes)

    def describe(self) -> str:
        pinned = [w.gpu for w in self.workers if w.gpu is not None]
        return f"{len(self.workers)} local worker processes" + (
            f", pinned to GPUs {', '.join(pinned)}" if pinned else "")

    def close(self) -> None:
        for worker in self.workers:
            worker.close()
