"""A local evaluation worker: judges the candidates its parent sends, one at a time.

    python -m kforge_nb.executors.worker_main FD      (started by LocalWorkers)

It runs the evaluator as the parent would (the candidate in a child process of this one),
sends each step as it ends (("step", text): built, each trial, timing, profile) and then the
Result, or the exception the evaluator raised (a ProblemError is the problem's fault and must
reach the session as it would in-process).
"""
from __future__ import annotations

import socket
import sys
from multiprocessing.connection import Connection


def serve(conn: Connection) -> None:
    from ..evaluator import evaluate
    from ..evaluator.parent import process
    process.zygote()                       # start the fork server now, before the first job
    while True:
        try:
            problem, code, target, options, folder = conn.recv()
        except EOFError:                   # the parent is gone or done
            return
        try:
            conn.send(("result", evaluate(problem, code, target, options, folder=folder,
                                          progress=lambda text: conn.send(("step", text)))))
        except Exception as err:           # noqa: BLE001  (sent to the parent, raised there)
            try:
                conn.send(("raise", err))
            except Exception:              # an exception that does not pickle
                conn.send(("raise", RuntimeError(f"{type(err).__name__}: {err}")))


if __name__ == "__main__":
    serve(Connection(socket.socket(fileno=int(sys.argv[1])).detach()))
