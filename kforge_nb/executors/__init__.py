"""Where candidates are evaluated, behind one interface.

    InProcess      this process drives the evaluator (its judge and candidate are child
                   processes, as always): `kforge run`, `%%kforge`, `kforge bench` by default
    LocalWorkers   N worker processes on this host, each pinned to one GPU when several are
                   present: `kforge bench --workers N`
    DaskCluster    the workers of a Dask distributed scheduler, chosen by the resources they
                   advertise (GPU=1, MPS=1): `kforge bench --cluster tcp://HOST:PORT`

Every executor keeps the evaluator's isolation (a child process per candidate, wherever the
evaluator runs) and its verdicts: the same candidate gets the same state from each. A worker
that dies while judging a candidate gets the candidate re-queued once; a second loss is
reported as a runtime_error of kind `worker_lost` (the engine's failure, said so).
"""
from __future__ import annotations

from pathlib import Path

from ..problem import Problem
from ..result import RUNTIME_ERROR, Result
from ..targets import Target


class ExecutorError(RuntimeError):
    """The engine cannot be used at all (a scheduler out of reach, no worker process)."""


class Executor:
    name = "executor"
    slots = 1                 # evaluations that may run at once

    def evaluate(self, problem: Problem, code: str | bytes, target: Target, options,
                 folder: Path) -> Result:
        raise NotImplementedError

    def describe(self) -> str:
        return self.name

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class InProcess(Executor):
    name = "in-process"
    reports_progress = True       # evaluate(..., progress=) is told each step as it ends

    def evaluate(self, problem, code, target, options, folder, progress=None):
        from ..evaluator import evaluate
        return evaluate(problem, code, target, options, folder=folder, progress=progress)

    def describe(self) -> str:
        return "this process (a child process per candidate)"


def worker_lost(where: str, causes: list[str]) -> Result:
    return Result(RUNTIME_ERROR, f"the evaluation worker died twice while judging this "
                  f"candidate ({'; '.join(causes)}); it was re-queued once. This is the "
                  f"engine's failure: the candidate runs in a child process of the worker",
                  error={"kind": "worker_lost", "text": "; ".join(causes), "where": where})


def make_executor(workers: int = 1, cluster: str | None = None,
                  log_dir: str | Path | None = None) -> Executor:
    """The executor the options ask for: a cluster, N local workers, or this process."""
    if cluster:
        from .cluster import DaskCluster
        return DaskCluster(cluster)
    if workers > 1:
        from .local import LocalWorkers
        return LocalWorkers(workers, log_dir=log_dir)
    return InProcess()


__all__ = ["Executor", "ExecutorError", "InProcess", "make_executor", "worker_lost"]
