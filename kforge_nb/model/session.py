"""A whole model: decompose -> one Session per part -> recompose -> judge end to end.

    decompose   a child process traces the model, writes each distinct part as a KernelBench
                problem (parts/part_KK.py), checks that the parts' reference code in order gives
                the model's output, and times each part inside the whole forward
    optimise    the chosen parts, biggest time share first, each in a normal Session (any
                provider, any target, the same budget and evaluation options)
    batch check a kernel the recomposition would take, judged again at the part's shapes where
                the model runs at its other batch size, with a trial at another batch size
                of its own: one that holds only at the size it was built for is left out
    recompose   one standalone file, model_new.py: each part runs its kernel where the kernel
                is correct and faster than the part's eager code, else the part's own code
    judge       the evaluator judges model_new.py against the model like any candidate

Events (ModelSession.subscribe), for the views in ui/model_view.py:
  decomposed    {"parts": [...], "total_ms", "check", "device", "folder"}
  part_started  {"part", "label", "artifacts"}
  part_event    {"part", "event": Event.to_dict()}       the part's own Session, relayed
  part_finished {"part": one row of summary()["parts"]}
  recomposed    {"path", "kernels": [part ids]}
  end_to_end    the end-to-end row of summary()
  finished      summary()
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

from .. import artifacts
from ..evaluator import EvalOptions
from ..executors import Executor, InProcess
from ..problem import Problem, ProblemError
from ..result import CORRECT, Result
from ..session.events import Event
from ..session.core import with_allowed
from ..session.records import Budget
from ..targets import get_target
from .recompose import PartCode, recompose

DECOMPOSE_TIMEOUT_S = 600.0
# a part's kernel must beat its eager code by more than timing noise to replace it
USE_MARGIN = 1.02
KEPT_AS_WRITTEN = ": kept as written"       # how a part's `why` ends where its kernel is left out


class ModelError(ValueError):
    """The model cannot be decomposed; the message says why (and the child's log tail)."""


def decompose(problem: Problem, device: str, folder: Path, repeats: int = 5,
              timeout_s: float = DECOMPOSE_TIMEOUT_S) -> dict:
    """Run the decomposition in a child process (the model is the user's code) and read what
    it wrote. Raises ModelError with the reason."""
    from ..evaluator.sandbox.layout import without_credentials
    folder.mkdir(parents=True, exist_ok=True)
    job = folder / "decompose_job.json"
    job.write_text(json.dumps({"source": problem.source, "name": problem.name, "device": device,
                               "folder": str(folder), "repeats": repeats}))
    log = folder / "decompose.log"
    with open(log, "w") as out:
        try:
            proc = subprocess.run([sys.executable, "-m", "kforge_nb.model.decompose_main",
                                   str(job)], stdout=out, stderr=subprocess.STDOUT,
                                  env=without_credentials(dict(os.environ)),
                                  timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise ModelError(f"decomposing {problem.label} took over {timeout_s:g} s; "
                             f"see {log}") from None
    found = folder / "decomposition.json"
    if proc.returncode != 0 or not found.exists():
        tail = log.read_text()[-3000:]
        raise ModelError(f"decomposing {problem.label} failed (exit {proc.returncode}); end of "
                         f"its log ({log}):\n{tail}")
    data = json.loads(found.read_text())
    if "error" in data:
        raise ModelError(f"{problem.label}: {data['error']}")
    return data


def order_of_work(parts: list[dict], chosen: list[int] | None, top: int | None) -> list[int]:
    """The parts to optimise, biggest share of the model's time first. `chosen`: the user's
    pick (ids); `top`: only the K biggest. Layout-only parts have nothing for a kernel to do."""
    ids = {p["id"] for p in parts}
    if chosen is not None:
        unknown = sorted(set(chosen) - ids)
        if unknown:
            raise ValueError(f"no part {', '.join(map(str, unknown))}: the model has parts "
                             f"0 to {len(parts) - 1} (list them with --list)")
    pool = [p for p in parts if (chosen is None and not p["glue"]) or
            (chosen is not None and p["id"] in chosen)]
    pool.sort(key=lambda p: -p["share"])
    return [p["id"] for p in (pool[:top] if top else pool)]


class ModelSession:
    """One model: its parts' sessions, the recomposed file and the end-to-end verdict."""

    def __init__(self, problem: Problem, target: str = "auto", agents=None,
                 budget: Budget | None = None, options: EvalOptions | None = None,
                 parts: list[int] | None = None, top: int | None = None,
                 use: str = "faster", out: str | Path = "kforge-runs",
                 executor: Executor | None = None, search=None):
        from ..agents import AgentConfig
        self.search = search                 # the strategy each part's session uses
        self.problem, self.target = problem, get_target(target)
        self.agents = agents or AgentConfig()
        self.budget = budget or Budget()
        self.options = options or EvalOptions()
        if use not in ("faster", "correct"):
            raise ValueError(f"use must be 'faster' or 'correct', not {use!r}")
        self.chosen, self.top, self.use = parts, top, use
        self.executor = executor or InProcess()
        self.folder = artifacts.new_folder(out, f"{problem.name}-model-{self.target.name}").resolve()
        self.decomposition: dict | None = None
        self.rows: dict[int, dict] = {}          # part id -> its row in summary()["parts"]
        self.sessions: dict[int, object] = {}
        self.end_to_end: dict = {}
        self.recomposed: Path | None = None
        self.events: list[Event] = []
        self._subscribers: list[Callable[[Event], None]] = []
        self._emit_lock = threading.Lock()
        self._skipped: set[int] = set()
        self._stop = threading.Event()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._current = None
        self.error: str | None = None

    # --- public API ---------------------------------------------------------------------------
    def subscribe(self, callback: Callable[[Event], None]) -> None:
        with self._emit_lock:
            past = list(self.events)
            self._subscribers.append(callback)
        for event in past:
            callback(event)

    def decompose(self) -> dict:
        """The parts (runs the decomposition once; later calls return it)."""
        if self.decomposition is None:
            self.decomposition = decompose(self.problem, self.target.device(),
                                           self.folder / "decomposition")
            for part in self.decomposition["parts"]:
                self.rows[part["id"]] = part_row(part)
            self._emit("decomposed", parts=self.decomposition["parts"],
                       total_ms=self.decomposition["total_ms"],
                       check=self.decomposition["check"], device=self.decomposition["device"],
                       folder=str(self.folder))
            self._save()
        return self.decomposition

    def skip(self, part: int) -> None:
        """Leave a part as it is (its reference code), if its session has not started."""
        self._skipped.add(part)

    def stop(self) -> None:
        """Stop the part under way (its best so far is kept) and every part after it."""
        self._stop.set()
        if self._current is not None:
            self._current.stop()

    def start(self) -> "ModelSession":
        self._thread = threading.Thread(target=self.run, daemon=True, name="kforge-model")
        self._thread.start()
        return self

    def wait(self, timeout: float | None = None) -> dict:
        self._done.wait(timeout)
        return self.summary()

    @property
    def running(self) -> bool:
        return self._thread is not None and not self._done.is_set()

    def run(self) -> dict:
        try:
            self.decompose()
            for part in order_of_work(self.decomposition["parts"], self.chosen, self.top):
                if self._stop.is_set():
                    break
                if part in self._skipped:
                    self.rows[part].update(state="skipped", why="skipped by you")
                    self._emit("part_finished", part=self.rows[part])
                    continue
                self._optimise(part)
            self._recompose_and_judge()
        except (ModelError, ProblemError, ValueError) as err:
            self.error = str(err)
        finally:
            summary = self.summary()
            self._save()
            self._emit("finished", **summary)
            self._done.set()
        return summary

    def summary(self) -> dict:
        parts = [self.rows[p["id"]] for p in (self.decomposition or {}).get("parts", [])]
        return {"model": self.problem.name, "target": self.target.name,
                "device": self.target.device(), "folder": str(self.folder),
                "parts": parts, "end_to_end": self.end_to_end,
                "decomposition": {k: (self.decomposition or {}).get(k)
                                  for k in ("total_ms", "check", "nodes")},
                "error": self.error}

    # --- the steps ----------------------------------------------------------------------------
    def _part_session(self, problem: Problem, folder: Path):
        from ..session.core import Session
        return Session(problem, self.target.name, agents=self.agents,      # it copies options
                       budget=dataclasses.replace(self.budget), options=self.options,
                       out=folder, executor=self.executor, search=self.search)

    def _optimise(self, part: int) -> None:
        info = self.decomposition["parts"][part]
        problem = Problem.from_file(info["file"])
        problem = dataclasses.replace(problem, name=f"{self.problem.name}-part{part:02d}")
        session = self._part_session(problem, self.folder / "parts")
        self.sessions[part] = self._current = session
        self._emit("part_started", part=part, label=info["label"], artifacts=str(session.folder))
        session.subscribe(lambda e, k=part: self._emit("part_event", part=k, event=e.to_dict()))
        session.run()
        self._current = None
        self.rows[part].update(part_result(session, self.use))
        if self.rows[part]["used"]:
            self.rows[part].update(self._batch_check(part, session.best))
        self._emit("part_finished", part=self.rows[part])
        self._save()
        if session.finish is not None and session.finish.failed:
            # the next part would fail the same way (no key, no model, a broken engine)
            raise ModelError(f"part {part}: {session.finish_reason}")

    def _batch_check(self, part: int, best) -> dict:
        """The part's kernel judged where the model calls it at its other batch size (the
        part's file at those shapes, written by the decomposition), each time with a trial at
        another batch size of its own: the recomposed model is called at any batch size, so a
        kernel that holds only at the size it was built for stays out of it. Its row's
        `batch_check`; and `used` off, with why in one line, where it does not hold."""
        info, batch = self.decomposition["parts"][part], self.decomposition.get("batch", {})
        files = [v["file"] for v in info.get("other_batch", [])]
        if not files and self.options.shape_check:
            return {"batch_check": {"state": CORRECT, "files": [], "message": (
                "its session judged it at another batch size; the model "
                + ("rejects its other batch size" if batch.get("error") else
                   "hands it the same shapes at its other batch size"))}}
        for k, file in enumerate(files or [info["file"]]):
            result = self._judge_part(part, best, file, self.folder / "batch_check" /
                                      f"part{part:02d}_{k}")
            if result.state != CORRECT:
                shapes = info["other_batch"][k]["shapes"] if files else None
                return {"used": False, "why": batch_reason(result, batch, shapes),
                        "batch_check": {"state": result.state, "files": [file],
                                        "message": result.message}}
        where = f"where the model calls it at batch size {batch['other']} and " if files else ""
        return {"batch_check": {"state": CORRECT, "files": files or [info["file"]],
                                "message": f"correct {where}at another batch size of its own"}}

    def _judge_part(self, part: int, best, file: str, folder: Path) -> Result:
        """The evaluator's verdict on a part's kernel against the part's file `file`, with a
        trial at another batch size and no timing (the session timed it)."""
        kept = best.generation.kept_ops if best.generation else []
        options = dataclasses.replace(with_allowed(self.options, kept), shape_check=True,
                                      measure=False, out_dir=self.folder)
        problem = dataclasses.replace(Problem.from_file(file),
                                      name=f"{self.problem.name}-part{part:02d}-batch")
        return self.executor.evaluate(problem, best.code, self.target, options, folder)

    def _recompose_and_judge(self) -> None:
        """The recomposition with the kernels the parts earned, judged end to end; where none
        earned one, or that judging is not correct, the model as written is judged too (a
        recomposition that keeps every part's own code), so the end-to-end figure is always
        reported, with its interval, and a failure says what it fell back to."""
        kernels, allow = self._recompose(self.folder / "model_new.py", with_kernels=True)
        self._emit("recomposed", path=str(self.recomposed), kernels=kernels)
        tried = None
        if kernels:
            result = self._judge(self.recomposed, allow, "end_to_end")
            if result.state == CORRECT:
                self.end_to_end = end_to_end_row(result, self.recomposed, kernels, allow)
                self._emit("end_to_end", **self.end_to_end)
                return
            tried = {"state": result.state, "kernels": kernels,
                     "message": result.message.splitlines()[0] if result.message else "",
                     "path": str(self.recomposed), "artifacts": result.artifacts}
        as_written = self.folder / "model_as_written.py"
        self._recompose(as_written, with_kernels=False)
        result = self._judge(as_written, ["*"], "as_written")
        self.end_to_end = {**end_to_end_row(result, as_written, [], ["*"]), "as_written": True,
                           "why_as_written": as_written_reason(tried, list(self.rows.values())),
                           "with_kernels": tried}
        self._emit("end_to_end", **self.end_to_end)

    def _recompose(self, path: Path, with_kernels: bool) -> tuple[list[int], list[str]]:
        """Write a recomposition to `path` (with the kernels of the parts that earned one, or
        every part as written): the parts with a kernel, and the torch ops it must be allowed."""
        codes, allow = [], set()
        for info in self.decomposition["parts"]:
            row, session = self.rows[info["id"]], self.sessions.get(info["id"])
            best = session.best if session is not None and row.get("used") else None
            if best is not None and with_kernels:
                codes.append(PartCode(info["id"], best.code, True,
                                      f"{session.folder}/best_candidate.py"))
                allow.update(best.generation.kept_ops if best.generation else [])
            else:
                codes.append(PartCode(info["id"], Path(info["file"]).read_text(), False,
                                      info["file"]))
                allow.update(info["torch_functions"])
        path.write_text(recompose(self.problem.source, self.problem.name, self.decomposition,
                                  codes))
        if with_kernels:
            self.recomposed = path
        return [c.part for c in codes if c.kernel], sorted(allow)

    def _judge(self, path: Path, allow: list[str], name: str) -> Result:
        """The evaluator's verdict on a recomposition, with these torch ops allowed (the parts'
        own; '*' for the model as written: a baseline with no kernel of its own to show)."""
        rails = dataclasses.replace(self.options.guardrails,
                                    allow=[*self.options.guardrails.allow, *allow])
        options = dataclasses.replace(self.options, guardrails=rails, out_dir=self.folder)
        return self.executor.evaluate(self.problem, path.read_text(), self.target, options,
                                      self.folder / name)

    # --- events and the saved state -----------------------------------------------------------
    def _emit(self, kind: str, **data) -> None:
        event = Event(kind, 0, data)
        with self._emit_lock:
            self.events.append(event)
            subscribers = list(self._subscribers)
        for callback in subscribers:
            try:
                callback(event)
            except Exception:          # a broken view must not stop the model's run
                pass

    def _save(self) -> None:
        artifacts.write_json(self.folder / "model.json", self.summary())


def part_row(part: dict) -> dict:
    return {"part": part["id"], "label": part["label"], "occurrences": part["occurrences"],
            "share": part["share"], "ms": part["ms"], "file": part["file"], "glue": part["glue"],
            "state": "not optimised", "speedup_vs_eager": None, "speedup_vs_compile": None,
            "timing_real": None, "used": False, "why": "not chosen", "artifacts": None}


def part_result(session, use: str = "faster") -> dict:
    """A finished part session as its row: state, speedups, and whether the recomposed model
    uses its kernel: when it is correct and (use="faster") faster than the part's eager code
    where timings are real."""
    best = session.best
    last = session.history[-1].result.state if session.history else "no candidate"
    row = {"artifacts": str(session.folder), "state": best.result.state if best else last}
    if best is None:
        return {**row, "used": False, "why": session.error or f"no correct kernel ({last})"}
    t = best.result.timing
    row.update(speedup_vs_eager=t.speedup_vs_eager, speedup_vs_compile=t.speedup_vs_compile,
               compile_mode=t.compile_mode, timing_real=t.real, candidate_ms=t.candidate_ms,
               measures=best.result.measures)
    if "parameter names differ" in best.result.message:
        return {**row, "used": False, "why": "its kernel names its weights differently from the "
                "part's Model, so the model's weights cannot be handed to it"}
    if use == "correct":
        return {**row, "used": True, "why": "correct (--use correct)"}
    if not t.real:
        return {**row, "used": True, "why": f"correct; not timed for real ({t.note})"}
    if t.speedup_vs_eager is None or t.speedup_vs_eager <= 1.0:
        return {**row, "used": False, "why": "slower than its eager code" + KEPT_AS_WRITTEN}
    if t.speedup_vs_eager < USE_MARGIN:
        return {**row, "used": False, "why": f"within {USE_MARGIN - 1:.0%} of its eager code "
                "(timing noise)" + KEPT_AS_WRITTEN}
    return {**row, "used": True, "why": "correct and faster than its eager code"}


def batch_reason(result: Result, batch: dict, shapes: list | None) -> str:
    """Why a part's kernel correct at its build size is not kept, in one line (the verdict's
    own words are in the row's `batch_check`)."""
    where = (f"where the model at batch size {batch['other']} hands it {shapes_text(shapes)}"
             if shapes else "at another batch size")
    return f"correct only at the size it was built for ({result.state} {where})" + \
        KEPT_AS_WRITTEN


def shapes_text(shapes: list) -> str:
    return ", ".join("(" + ", ".join(map(str, s)) + ")" for s in shapes)


def as_written_reason(tried: dict | None, rows: list[dict] = ()) -> str:
    """Why the model as written is judged: the recomposition with kernels failed (`tried`), or
    no part's kernel was kept (the correct ones left out say why)."""
    if tried is None:
        left_out = [f"part {r['part']} {r['why'].removesuffix(KEPT_AS_WRITTEN)}" for r in rows
                    if r.get("state") == CORRECT and not r.get("used")]
        if left_out:
            return (f"no part's kernel is kept ({'; '.join(left_out)}): the model as written, "
                    "judged end to end")
        return ("no part has a kernel that is correct and faster than its own eager code: "
                "the model as written, judged end to end")
    return (f"the recomposition with the kernels of parts "
            f"{', '.join(map(str, tried['kernels']))} was {tried['state']} end to end "
            f"({tried['message'][:300]}): the model as written, judged instead")


def end_to_end_row(result: Result, path: Path, kernels: list[int], allowed: list[str]) -> dict:
    t = result.timing
    return {"state": result.state, "message": result.message, "path": str(path),
            "kernels": kernels, "allowed_ops": allowed,
            "speedup_vs_eager": t.speedup_vs_eager if result.state == CORRECT else None,
            "speedup_vs_compile": t.speedup_vs_compile if result.state == CORRECT else None,
            # the intervals on the row itself: --json prints the row without its result
            "speedup_vs_eager_ci": t.speedup_vs_eager_ci if result.state == CORRECT else None,
            "speedup_vs_compile_ci": t.speedup_vs_compile_ci if result.state == CORRECT else None,
            "timing_real": t.real, "candidate_ms": t.candidate_ms, "eager_ms": t.eager_ms,
            "compile_ms": t.compile_ms, "compile_mode": t.compile_mode,
            "artifacts": result.artifacts,
            "measures": result.measures,
            "result": result.to_dict()}
