"""`--cluster tcp://HOST:PORT`: candidates are judged on the workers of a Dask scheduler.

Workers advertise what they can run as Dask resources, and each candidate goes to a worker
that has what its target needs: CUDA and (where any worker has a GPU) Triton need `GPU=1`,
Metal needs `MPS=1` (how a Linux notebook gets `--target metal` judged on a Mac), C++ runs
anywhere. `kforge worker ADDRESS` starts workers that advertise what their machine has.

On the worker the evaluator runs as it does here (a child process per candidate); the Result
and the evaluation's files come back (remote.py). A worker that dies while judging a candidate
gets it re-queued once by kforge, then reported (`worker_lost`). The scheduler also retries a
task whose worker died, `distributed.scheduler.allowed-failures` times (3 by default); start it
with DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=0 to leave that to kforge alone.
"""
from __future__ import annotations

import logging
import uuid
from concurrent.futures import CancelledError

from ..result import UNAVAILABLE, Result
from . import Executor, ExecutorError, worker_lost
from .remote import judge_on_worker, unpacked

# what a target needs from a worker; triton needs a GPU only where the cluster has one (else
# it runs under the CPU interpreter: correct, timings marked as not performance figures)
NEEDS = {"cuda": "GPU", "metal": "MPS", "triton": "GPU?"}
CONNECT_TIMEOUT_S = 10
WORKER_WAIT_S = 60              # for a first worker to join a scheduler that has none


def start_hint(address: str) -> str:
    return (f"start a scheduler with `dask scheduler` and workers with `kforge worker "
            f"{address}` (they advertise GPU=1 per GPU, MPS=1 on a Mac)")


class DaskCluster(Executor):
    name = "dask"

    def __init__(self, address: str, timeout_s: float = CONNECT_TIMEOUT_S):
        try:
            from distributed import Client
        except ImportError:
            raise ExecutorError("--cluster needs Dask distributed: pip install "
                                "'kforge-nb[cluster]'") from None
        self.address = address
        # a lost scheduler makes the client's reconnection loop log tracebacks; kforge says
        # it in one line instead (ExecutorError below)
        for name in ("distributed.client", "distributed.utils"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        try:
            self.client = Client(address, timeout=timeout_s, set_as_default=False)
        except (OSError, TimeoutError) as err:
            raise ExecutorError(f"cannot reach the Dask scheduler at {address} ({err}); "
                                f"{start_hint(address)}") from None
        self.check_workers()

    def workers(self) -> dict[str, dict]:
        return self.client.scheduler_info(n_workers=-1)["workers"]

    def check_workers(self) -> None:
        """Every worker must be able to import kforge_nb (the same version)."""
        from .. import __version__
        if not self.workers():
            try:
                self.client.wait_for_workers(1, timeout=WORKER_WAIT_S)
            except TimeoutError:
                raise ExecutorError(f"the Dask scheduler at {self.address} has no workers "
                                    f"(waited {WORKER_WAIT_S} s); start some there with "
                                    f"`kforge worker {self.address}`") from None
        versions = self.client.run(_kforge_version, on_error="return")
        wrong = {w: v if isinstance(v, str) else f"cannot import it: {v}"
                 for w, v in versions.items() if v != __version__}
        if wrong:
            raise ExecutorError(f"Dask workers without kforge-nb {__version__}: " + ", ".join(
                f"{w} ({v})" for w, v in wrong.items()) + "; pip install kforge-nb there")

    @property
    def slots(self) -> int:
        return max(1, sum(w.get("nthreads", 1) for w in self.workers().values()))

    def resources_for(self, target_name: str) -> dict[str, int] | str:
        """Dask resources for the target, or why no worker of the cluster can run it."""
        need = NEEDS.get(target_name)
        if need is None:
            return {}
        advertised = {r for w in self.workers().values() for r in w.get("resources", {})}
        if need.endswith("?"):
            return {need[:-1]: 1} if need[:-1] in advertised else {}
        if need in advertised:
            return {need: 1}
        return (f"no worker of the Dask cluster at {self.address} advertises {need}=1, which "
                f"target {target_name} needs; {start_hint(self.address)}")

    def evaluate(self, problem, code, target, options, folder):
        from distributed import KilledWorker
        resources = self.resources_for(target.name)
        if isinstance(resources, str):
            return Result(UNAVAILABLE, resources, target=target.name)
        causes = []
        for _ in range(2):                     # the first try, and one re-queue
            future = self.client.submit(
                judge_on_worker, problem, code, target.name, options, resources=resources,
                pure=False, key=f"kforge-{problem.name}-{uuid.uuid4().hex[:12]}")
            try:
                return unpacked(future.result(), folder)
            except KilledWorker as err:
                causes.append(f"{err}")
            except (OSError, TimeoutError, CancelledError) as err:   # the scheduler went away
                reason = str(err).splitlines()[0]
                raise ExecutorError(f"lost the Dask scheduler at {self.address} ({reason})"
                                    ) from None
        return worker_lost(self.address, causes)

    def describe(self) -> str:
        workers = self.workers()
        have = sorted({f"{r}={int(v)}" for w in workers.values()
                       for r, v in w.get("resources", {}).items()})
        return (f"Dask cluster {self.address}: {len(workers)} workers"
                + (f" ({', '.join(have)})" if have else ""))

    def close(self) -> None:
        self.client.close()


def _kforge_version() -> str:
    from .. import __version__
    return __version__


def worker_commands(address: str, gpus: list[str], mps: bool,
                    name: str | None = None) -> list[tuple[list[str], dict[str, str]]]:
    """`kforge worker ADDRESS`: the `dask worker` processes that offer this machine to a
    cluster, as (argv, environment) pairs: one per GPU, pinned to it and advertising GPU=1;
    else one advertising MPS=1 on a Mac; else one CPU worker. One thread each: a worker judges
    one candidate at a time, so its timings are its own."""
    import os
    import socket
    import sys
    from ..evaluator.sandbox.layout import without_credentials
    base = name or socket.gethostname()
    env = without_credentials(dict(os.environ))
    argv = [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
            "--no-dashboard"]
    if gpus:
        return [([*argv, "--name", f"{base}-gpu{gpu}", "--resources", "GPU=1"],
                 {**env, "CUDA_VISIBLE_DEVICES": gpu}) for gpu in gpus]
    if mps:
        return [([*argv, "--name", f"{base}-mps", "--resources", "MPS=1"], env)]
    return [([*argv, "--name", f"{base}-cpu"], env)]
