"""`kforge bench`: the agent (or just the evaluator, on given candidates) over a suite.

Problems run concurrently, as many as the executor has slots (one in this process; N local
workers; the threads of a Dask cluster's workers); each problem's candidates are judged by the
executor. Each finished problem is written to the bench's folder at once (store.py), and the
progress view is told (a tqdm bar in a terminal, a widget in a notebook).
"""
from __future__ import annotations

import dataclasses
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from ..agents import AgentConfig
from ..evaluator import EvalOptions
from ..executors import Executor, ExecutorError, InProcess
from ..problem import Problem, ProblemError
from ..session import Budget, Session
from ..session.finish import BAD_INPUT, ENGINE_ERROR
from .report import Row, row_from_result, summary
from .store import Store
from .suite import Entry, candidate_for


class Progress:
    """What a bench tells its view; every method may be called from any thread."""

    def started(self, total: int, done: int, bench: "Bench") -> None: ...
    def begun(self, id: str) -> None: ...
    def finished_row(self, row: Row) -> None: ...
    def ended(self, rows: list[Row]) -> None: ...


class Bench:
    def __init__(self, entries: list[Entry], target: str, store: Store,
                 executor: Executor | None = None, agents: AgentConfig | None = None,
                 budget: Budget | None = None, options: EvalOptions | None = None,
                 candidates: str | Path | None = None, search=None):
        self.entries, self.target, self.store = entries, target, store
        self.search = search                 # the strategy each problem's session uses
        self.executor = executor or InProcess()
        self.agents, self.budget = agents or AgentConfig(), budget or Budget()
        self.options = options or EvalOptions()
        self.candidates = Path(candidates) if candidates else None
        self._live: set[Session] = set()
        self._lock = threading.Lock()
        self._abort: str | None = None
        self._thread: threading.Thread | None = None
        self.error: str | None = None        # why a bench started in the background ended early

    @property
    def mode(self) -> str:
        return "evaluator on given candidates" if self.candidates else \
            f"agent ({self.agents.provider})"

    def rows(self) -> list[Row]:
        return [self.store.rows[e.id] for e in self.entries if e.id in self.store.rows]

    def report(self) -> dict:
        """The rows and their totals, as results.json holds them."""
        rows = self.rows()
        return {"summary": summary(rows), "rows": [dataclasses.asdict(r) for r in rows]}

    def run(self, progress: Progress | None = None) -> list[Row]:
        """Every problem not finished yet; raises BenchBusy if this bench is running already."""
        with self.store.held():
            return self._run(progress or Progress())

    def _run(self, progress: Progress) -> list[Row]:
        todo = [e for e in self.entries if not self.store.done(e.id)]
        progress.started(len(self.entries), len(self.entries) - len(todo), self)
        order = [e.id for e in self.entries]
        pool = ThreadPoolExecutor(max(1, min(self.executor.slots, len(todo))),
                                  thread_name_prefix="kforge-bench")
        try:
            futures = [pool.submit(self.one, entry, progress) for entry in todo]
            for future in as_completed(futures):
                row = future.result()
                self.store.add(row)
                self.store.write_tables(order)
                progress.finished_row(row)
        except KeyboardInterrupt:
            self.stop()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        rows = self.rows()
        progress.ended(rows)             # the table so far, even when the engine went away
        if self._abort:
            raise ExecutorError(f"{self._abort}; {len(self.store.rows)} finished problems are "
                                f"saved in {self.store.folder}: run the same bench again to go on")
        return rows

    def start(self, progress: Progress | None = None) -> "Bench":
        """Run in a background thread (a notebook stays usable); the executor is closed at the
        end. `wait()` for it, `stop()` it."""
        def run():
            try:
                with self.executor:
                    self.run(progress)
            except Exception as err:     # shown by the view and kept: nothing is raised away
                self.error = f"{type(err).__name__}: {err}" if not isinstance(
                    err, ExecutorError) else str(err)
        self._thread = threading.Thread(target=run, daemon=True, name="kforge-bench-main")
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> list[Row]:
        if self._thread is not None:
            self._thread.join(timeout)
        return self.rows()

    def stop(self) -> None:
        """Stop every session under way (after its current step); start no other problem."""
        self._abort = self._abort or "stopped"
        with self._lock:
            for session in self._live:
                session.stop()

    # --- one problem ----------------------------------------------------------------------
    def one(self, entry: Entry, progress: Progress) -> Row:
        if self._abort:
            return Row(entry.id, "interrupted", note=self._abort)
        progress.begun(entry.id)
        started = time.monotonic()
        try:
            problem = Problem.from_file(entry.path)
            row = self.judged(entry, problem, started) if self.candidates else \
                self.session_row(entry, problem, started)
        except ProblemError as err:      # a broken suite entry is a row, not the end of it
            return Row(entry.id, "bad_problem", seconds=time.monotonic() - started,
                       note=str(err)[:200])
        except ExecutorError as err:
            row = Row(entry.id, "engine_error", note=str(err)[:200])
        if row.state == "engine_error":  # the engine is gone: no other problem can be judged
            self._abort = self._abort or row.note
        return row

    def judged(self, entry: Entry, problem: Problem, started: float) -> Row:
        path = candidate_for(entry, self.candidates)
        if path is None:
            return Row(entry.id, "no_candidate", note=f"no candidate for {entry.id} in "
                       f"{self.candidates}")
        result = self.executor.evaluate(problem, path.read_bytes(), get_target(self.target),
                                        self.options, self.store.folder / "evals" /
                                        entry.id)
        return row_from_result(entry.id, result, time.monotonic() - started,
                               note=str(path))

    def session_row(self, entry: Entry, problem: Problem, started: float) -> Row:
        session = Session(problem, self.target, self.agents, self.budget, self.options,
                          out=self.store.folder / "runs",
                          executor=self.executor, search=self.search)
        with self._lock:
            self._live.add(session)
        try:
            session.run()
        finally:
            with self._lock:
                self._live.discard(session)
        if self._abort:                  # stopped part way: not a finished problem
            return Row(entry.id, "interrupted", folder=str(session.folder))
        return row_for(entry.id, session, time.monotonic() - started)


def get_target(name: str):
    from ..targets import get_target as lookup
    return lookup(name)


def row_for(id: str, session: Session, seconds: float) -> Row:
    iterations = len({a.iteration for a in session.history})
    kind = session.finish.kind if session.finish else None
    if kind == ENGINE_ERROR:
        return Row(id, "engine_error", note=session.error or "", folder=str(session.folder))
    if kind == BAD_INPUT:
        return Row(id, "bad_problem", note=(session.error or "")[:200],
                   folder=str(session.folder))
    best = session.best
    if best is not None:
        note = best.generation.notes if best.generation else ""
        row = row_from_result(id, best.result, seconds, iterations, note)
    elif session.history:
        row = row_from_result(id, session.history[-1].result, seconds, iterations)
    else:
        row = Row(id, "error" if session.error else "no_candidate", iterations=iterations,
                  seconds=seconds, note=(session.error or session.finish_reason)[:200])
    row.folder = str(Path(session.folder).resolve())
    return row
