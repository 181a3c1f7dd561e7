"""The Session: the remote control of one kernel-engineering run on one problem and one target.

It holds the run's state (the history of candidates, pins and prunes, the final judging's
verdict), takes decisions (accept, edit, redirect, skip, stop), judges hand-written code
(`evaluate_code`) and says where the run stands (`best`, `ties`, `pending`, `finished`,
`summary()`). Around it, each in a module of its own:

    spec.py       what was asked (RunSpec, frozen) and what the run derives (RunState)
    loop.py       the run itself: a functional pass, then optimisation rounds
    finish.py     how it ended: a kind for code, a sentence for the person
    plans.py      what each branch of a round asks for
    standing.py   which candidate is best, which tied (ties are ties: intervals.compare)
    repeats.py    code already judged is not judged again (`same_as`)
    ledger.py     the budget: tokens, cost and wall time spent, calls reserved
    journal.py    the events views subscribe to, and the files of the run folder
    saved.py      run.json: `kforge runs` lists it, `Session.resume(folder)` goes on from it

The session emits events and never draws anything; UIs subscribe.
"""
from __future__ import annotations

import dataclasses
import inspect
import threading
import time
from pathlib import Path
from typing import Callable

from .. import artifacts, export
from ..agents import AgentConfig
from ..agents.base import AnalysisAgent, Generation, GenerationAgent, Recommendation, Usage
from ..evaluator import EvalOptions
from ..executors import Executor, InProcess
from ..problem import Problem
from ..providers import retry
from ..result import CORRECT, Result
from ..targets import Target, get_target
from . import confirm, said, saved
from .decisions import ACCEPT, EDIT, REDIRECT, SKIP, STOP, AutoPolicy, Decision, QueuePolicy
from .events import Event
from .finish import CTRL_C, Finish
from .inputs import load_translation, parse_aux
from .journal import Journal
from .ledger import Ledger
from .loop import Loop
from .records import Attempt, Budget, History
from .repeats import Asking, Repeats
from .search import Tree, make_search
from .spec import RunSpec, state_for
from .standing import Standing


class Session:
    """One kernel-engineering session on one problem and one target."""

    def __init__(self, problem: Problem, target: str = "auto", agents: AgentConfig | None = None,
                 budget: Budget | None = None, options: EvalOptions | None = None,
                 mode: str = "auto", aux: list[str] | None = None,
                 translate_from: str | None = None, out: str | Path = "kforge-runs",
                 policy=None, folder: str | Path | None = None,
                 clock: Callable[[], float] = time.monotonic, executor: Executor | None = None,
                 search=None):
        if mode not in ("auto", "review"):
            raise ValueError(f"mode must be 'auto' or 'review', not {mode!r}")
        target = get_target(target)
        self.spec = RunSpec(problem, target, agents or AgentConfig(), options or EvalOptions(),
                            mode, tuple(aux or []), load_translation(translate_from))
        # a resumed run goes on in its own folder
        self.state = state_for(self.spec, Path(folder) if folder else
                               artifacts.new_folder(out, f"{problem.name}-{target.name}"))
        self.ledger = Ledger(budget or Budget(), clock)
        self.executor = executor or InProcess()      # where candidates are judged
        self.policy = policy or (QueuePolicy() if mode == "review" else AutoPolicy())
        self.search = make_search(search or "greedy") if isinstance(search, str) or \
            search is None else search           # which candidates a round expands
        self.pinned: set[str] = set()        # ids the person wants expanded every round
        self.pruned: set[str] = set()        # ids whose branch is never expanded again
        self.finished_branches: set[str] = set()   # ids the analyst had nothing more for
        self.standing = Standing(self.options)     # the best, the ties, the final judging's
        self.aux = [parse_aux(spec) for spec in self.spec.aux]
        self.journal = Journal(self.folder)
        self.history: History = History()
        self._repeats = Repeats()
        self._manual_slots: set[tuple[int, int]] = set()   # hand-judged ids being judged
        self._manual_lock = threading.Lock()
        self._stop = threading.Event()
        self._done = threading.Event()
        self._closing = False        # set before `finished` is emitted: views see the end
        self._thread: threading.Thread | None = None
        self._state_lock = threading.Lock()
        self.config = saved.config_of(self)

    @classmethod
    def resume(cls, folder: str | Path, policy=None, mode: str | None = None,
               **budget_changes) -> "Session":
        """The saved run in `folder`, ready to `run()` or `start()` from its next iteration
        (see saved.py); `budget_changes` raise the saved budget (iterations=12, ...)."""
        run, args = saved.resumable(folder, **budget_changes)
        args["mode"] = mode or args["mode"]
        session = cls(**args, policy=policy)
        session.spec = dataclasses.replace(           # the kernel's file may be gone: its source
            session.spec, translate_from=run.data["config"]["translate_from"])
        session.config = saved.config_of(session)
        session.restore(run, notes=saved.resume_notes(run))
        return session

    # --- what was asked (the spec, never changed by the run) ----------------------------------
    @property
    def problem(self) -> Problem:
        return self.spec.problem

    @property
    def target(self) -> Target:
        return self.spec.target

    @property
    def agents_config(self) -> AgentConfig:
        return self.spec.agents

    @property
    def mode(self) -> str:
        return self.spec.mode

    @property
    def aux_specs(self) -> list[str]:
        return list(self.spec.aux)

    @property
    def translate_from(self) -> str | None:
        return self.spec.translate_from

    # --- what the run holds -------------------------------------------------------------------
    @property
    def options(self) -> EvalOptions:
        """The evaluation options candidates are judged with: the spec's, in the run's folder."""
        return self.state.options

    @property
    def folder(self) -> Path:
        return self.state.folder

    @property
    def next_iteration(self) -> int:
        return self.state.next_iteration

    @property
    def stale_rounds(self) -> int:
        return self.state.stale_rounds

    @property
    def generator(self) -> GenerationAgent | None:
        return self.state.generator

    @property
    def analyst(self) -> AnalysisAgent | None:
        return self.state.analyst

    @property
    def provider_description(self) -> str:
        return self.state.provider_description

    @property
    def finish(self) -> Finish | None:
        """How the run ended (finish.py); None before its end."""
        return self.state.finish

    @property
    def finish_reason(self) -> str:
        """Why the run ended, in words ("" before its end); code reads `finish.kind`."""
        return self.finish.text if self.finish else ""

    @property
    def error(self) -> str | None:
        """The error the run ended on, if it ended on one."""
        return self.finish.error if self.finish else None

    @property
    def _last_recommendation(self) -> Recommendation | None:
        return self.state.last_recommendation        # said.py's advice reads it

    @property
    def events(self) -> list[Event]:
        return self.journal.events

    @property
    def budget(self) -> Budget:
        return self.ledger.budget

    @budget.setter
    def budget(self, budget: Budget) -> None:
        self.ledger.budget = budget

    @property
    def usage(self) -> Usage:
        return self.ledger.usage

    @property
    def confirmed(self) -> dict[str, float]:
        """The finalists' median speedups (the final judging, confirm.py)."""
        return self.standing.confirmed

    @confirmed.setter
    def confirmed(self, medians: dict[str, float]) -> None:
        self.standing.confirmed = medians

    @property
    def outranked(self) -> set[str]:
        """The correct candidates that were not finalists of the final judging."""
        return self.standing.outranked

    @outranked.setter
    def outranked(self, ids: set[str]) -> None:
        self.standing.outranked = ids

    def subscribe(self, callback: Callable[[Event], None], replay: bool = True) -> None:
        """Follow the session; a view that subscribes late (or to a resumed run) is first shown
        what happened, unless `replay` is False."""
        self.journal.subscribe(callback, replay)

    # --- where it stands ----------------------------------------------------------------------
    @property
    def best(self) -> Attempt | None:
        return self.standing.of(self.history)[0]

    @property
    def ties(self) -> dict[str, str]:
        """Candidates that were faster than the best of their time on their point estimate
        but whose intervals overlapped its: {candidate id: the id it tied with}."""
        return dict(self.standing.of(self.history)[1])

    def rank(self, attempt: Attempt) -> tuple:
        """The order the search expands candidates in (standing.py)."""
        best = self.best
        return self.standing.rank(attempt, best, self.standing.relative(self.history, best))

    _rank = rank           # the name the search's tests use

    @property
    def running(self) -> bool:
        return self._thread is not None and not self._closing

    @property
    def pending(self) -> bool:
        """A review-mode session that has made a recommendation and not yet had its answer."""
        return self.mode == "review" and self.journal.awaiting

    @property
    def finished(self) -> bool:
        """The run has ended (its `finished` event is out)."""
        return self.journal.finished

    @property
    def confirm_count(self) -> int:
        """Finalists of the final judging: --confirm, else 3 for beam and evolve (they judge
        many candidates, so their fastest measured is the likeliest fluke) and 0 for greedy."""
        if self.budget.confirm is not None:
            return self.budget.confirm
        return confirm.DEFAULT_WIDE if self.search.width > 1 else 0

    def tree(self) -> Tree:
        """The attempts as a search tree, with the pins and prunes (see search.py)."""
        return Tree(list(self.history), self.pinned, self.pruned, self.finished_branches)

    def elapsed(self) -> float:
        """Seconds this session has run, the earlier runs of a resumed one included."""
        return self.ledger.elapsed()

    # --- the remote control -------------------------------------------------------------------
    def run(self) -> Attempt | None:
        """Run here until the end (see loop.py); the best candidate. A model API call that is
        retried in it is said as a `retry` event."""
        finish = None
        try:
            with retry.reporting(self._said_retry):
                finish = self._loop().run()
        except KeyboardInterrupt:     # Ctrl-C in `kforge run`: saved as interrupted, resumable
            finish = CTRL_C
            self.state.status = "interrupted"
            raise
        finally:
            self._finish(finish)
        return self.best

    def _loop(self) -> Loop:
        """The loop, handed the parts of the session it works with."""
        return Loop(self, self.spec, self.state, self.ledger, self.journal, self.search,
                    self.policy, self.executor, self._stop)

    def _said_retry(self, said: dict) -> None:
        self.journal.emit("retry", self.next_iteration, **said)

    def start(self) -> "Session":
        """Run in a background thread (the notebook's cell returns at once)."""
        self._thread = threading.Thread(target=self.run, daemon=True, name="kforge-session")
        self._thread.start()
        return self

    def wait(self, timeout: float | None = None) -> Attempt | None:
        self._done.wait(timeout)
        return self.best

    def accept(self) -> None:
        self._decide(Decision(ACCEPT))

    def edit(self, text: str) -> None:
        self._decide(Decision(EDIT, text))

    def redirect(self, text: str) -> None:
        self._decide(Decision(REDIRECT, text))

    def skip(self) -> None:
        self._decide(Decision(SKIP))

    def stop(self) -> None:
        self._stop.set()
        if isinstance(self.policy, QueuePolicy):
            self.policy.put(Decision(STOP))

    def _decide(self, decision: Decision) -> None:
        if not isinstance(self.policy, QueuePolicy):
            raise RuntimeError("this session decides by itself (mode 'auto'); start it with "
                               "mode='review' to accept, edit, redirect or skip by hand")
        self.policy.put(decision)

    def pin(self, attempt_id: str, on: bool = True) -> None:
        """Expand this candidate every round from now on (before the search's own choices);
        `on=False` unpins it."""
        self._steer(self.pinned, attempt_id, on, "pin")

    def prune(self, attempt_id: str, on: bool = True) -> None:
        """Never expand this candidate or anything descended from it again (it stays in the
        history, and may still be the best); `on=False` takes the prune back."""
        self._steer(self.pruned, attempt_id, on, "prune")

    def _steer(self, ids: set[str], attempt_id: str, on: bool, verb: str) -> None:
        attempt = next((a for a in self.history if a.id == str(attempt_id)), None)
        if attempt is None:
            raise ValueError(f"no candidate {attempt_id!r} to {verb}; ids are iteration.sample, "
                             f"e.g. {self.history[-1].id if self.history else '0.0'}")
        if verb == "pin" and on and attempt.result.state != CORRECT:
            raise ValueError(f"candidate {attempt.id} is {attempt.result.state}: only a correct "
                             "candidate can be pinned (a round expands it)")
        with self._state_lock:
            (ids.add if on else ids.discard)(attempt.id)
        self.journal.emit("steer", attempt.iteration, action=verb if on else f"un{verb}",
                          id=attempt.id, pinned=sorted(self.pinned), pruned=sorted(self.pruned))
        self.save_state()

    # --- judging candidates -------------------------------------------------------------------
    def evaluate_code(self, code: str, label: str = "manual") -> Attempt:
        """Judge a hand-written or hand-edited candidate and add it to the history. It joins
        the iteration under way (the last one once the run has ended) with a sample number
        above the agent's samples, so its id and folder never collide with an agent's. Code
        that repeats a judged candidate's (comments and blank lines aside) is not judged again:
        the new attempt takes its verdict and says `same_as` it."""
        iteration, sample = self._manual_slot()
        try:
            return self.judge_and_record(code, iteration, sample, None, label)
        finally:
            with self._manual_lock:
                self._manual_slots.discard((iteration, sample))

    def _manual_slot(self) -> tuple[int, int]:
        with self._manual_lock:
            iteration = self.next_iteration if self.running or not self.history \
                else self.history[-1].iteration
            taken = [a.sample for a in self.history if a.iteration == iteration]
            taken += [s for i, s in self._manual_slots if i == iteration]
            agent_samples = self.search.width * max(1, self.budget.samples)   # in one round
            sample = max([agent_samples - 1, *taken]) + 1
            self._manual_slots.add((iteration, sample))
            return iteration, sample

    def judge_and_record(self, code: str, iteration: int, sample: int,
                         generation: Generation | None, kind: str, recommendation=None,
                         decision=None, parent: str | None = None,
                         applied: Recommendation | None = None) -> Attempt:
        """Judge a candidate (or take the verdict of an earlier one with the same code) and
        record it."""
        key, earlier = self._repeats.claim(code, self.history, Asking.of(
            iteration, parent, kind, generation, recommendation, decision, applied))
        if earlier is not None:       # the same code as a judged candidate: its verdict
            result = Result.from_dict(earlier.result.to_dict())
            attempt = Attempt(iteration, sample, kind, code, result, generation, recommendation,
                              decision, parent, applied=applied, same_as=earlier.id)
            self.journal.save_repeat(iteration, sample, code, earlier)
            self.record(attempt)
            return attempt
        try:
            folder = self.folder / f"iter-{iteration:02d}" / f"sample-{sample}"
            result = self._judge(code, self.options_for(generation, parent), folder,
                                 iteration, sample)
            attempt = Attempt(iteration, sample, kind, code, result, generation, recommendation,
                              decision, parent, applied=applied)
            self.record(attempt)
        finally:
            self._repeats.done(key)
        return attempt

    def _judge(self, code: str, options: EvalOptions, folder: Path, iteration: int,
               sample: int) -> Result:
        """The executor's verdict; where it reports progress (this process, local workers),
        each step the evaluator ends (built, each trial, timing, profile) is said as an
        `evaluation_step` event, so a long judging is seen going on."""
        if not getattr(self.executor, "reports_progress", False) or \
                "progress" not in inspect.signature(self.executor.evaluate).parameters:
            # a subclass that overrides evaluate() without `progress` is judged as before
            return self.executor.evaluate(self.problem, code, self.target, options, folder)

        def step(text: str) -> None:
            self.journal.emit("evaluation_step", iteration, sample=sample,
                              id=f"{iteration}.{sample}", text=text)
        return self.executor.evaluate(self.problem, code, self.target, options, folder,
                                      progress=step)

    def options_for(self, generation: Generation | None, parent: str | None = None
                    ) -> EvalOptions:
        """The session's options, with the torch ops the generation kept on purpose allowed,
        and Nsight Compute's counters asked for where the analyst reads them, only if the
        candidate beats its parent (the analyst reads a lineage's best; they cost seconds)."""
        options = self.rival_options(self.options)
        if generation is not None and generation.kept_ops:
            options = with_allowed(options, generation.kept_ops)
        if self.spec.agents.ncu and self.analyst is not None and \
                getattr(self.analyst, "reads_counters", True):
            base = self.tree().by_id.get(parent) if parent else None
            over = base.result.timing.speedup_vs_eager \
                if base is not None and base.result.state == CORRECT else None
            options = dataclasses.replace(options, ncu=True, ncu_over=over)
        return options

    def rival_options(self, options: EvalOptions, rival: Attempt | None = None) -> EvalOptions:
        """The options with the best so far (or `rival`) to be timed beside the candidate:
        the head-to-head every decision is made with (standing.py)."""
        rival = rival or self.best
        if rival is None or not rival.code or not rival.result.timing.real:
            return options
        return dataclasses.replace(options, rival=rival.code, rival_id=rival.id)

    def record(self, attempt: Attempt) -> None:
        with self._state_lock:       # samples finish on several threads; the tree is read whole
            attempt.lineage = self.tree().lineage_of(attempt)
            self.history.append(attempt)
        best, ties = self.standing.of(self.history)
        self.journal.emit("evaluated", attempt.iteration, sample=attempt.sample,
                          code=attempt.code, result=attempt.result.to_dict(),
                          best=best is attempt, kind=attempt.kind, parent=attempt.parent,
                          lineage=attempt.lineage, same_as=attempt.same_as,
                          tie_with=ties.get(attempt.id))
        self.journal.emit("usage", attempt.iteration, **self.ledger.as_dict())
        if self.state.status:               # not for a candidate judged before the run starts
            self.save_state()

    # --- what it says -------------------------------------------------------------------------
    def export(self, path: str | Path, attempt: Attempt | None = None) -> Path:
        """Write the best (or the given) candidate as a standalone .py; see kforge_nb/export.py."""
        from ..export import export
        return export(self, path, attempt)

    def summary(self) -> dict:
        """The run in one flat dict (`kforge run --json`, the views' header): said.py."""
        return said.summary_of(self)

    def advice(self) -> str | None:
        """Said plainly when the best kernel is slower than PyTorch (said.py)."""
        return said.advice_of(self)

    # --- saved state --------------------------------------------------------------------------
    def restore(self, run: "saved.SavedRun", notes: list[str] = ()) -> None:
        """Take back a saved run's history, usage, elapsed time and events (see saved.py)."""
        progress = run.data["progress"]
        self.history = History(saved.attempt_from_dict(d) for d in run.data["history"])
        self.standing.forget()
        self._repeats.forget()
        self.ledger.restore(saved.usage_from_dict(progress.get("usage", {})),
                            float(progress.get("elapsed_s", 0.0)))
        # an iteration with a judged candidate is done (with several samples, some may be
        # missing: they are not asked for again), so nothing judged is judged twice
        # (a hand-judged edit joins an iteration under way: it does not end it)
        agents = [a for a in self.history if a.kind != "manual"]
        self.state.next_iteration = max([progress["next_iteration"],
                                         *(a.iteration + 1 for a in agents)])
        # a run that ended on its own (patience, a provider error, Stop) gets fresh patience
        self.state.stale_rounds = progress["stale_rounds"] if run.status == "interrupted" else 0
        self.pinned = set(progress.get("pinned", []))
        self.pruned = set(progress.get("pruned", []))
        self.finished_branches = set(progress.get("finished_branches", []))
        self.confirmed = dict(progress.get("confirmed", {}))
        self.outranked = set(progress.get("outranked", []))
        self.standing.duels.clear()
        self.standing.duels.update({(d["candidate"], d["id"]): d
                                    for d in progress.get("duels", []) if isinstance(d, dict)
                                    and "candidate" in d and "id" in d})
        self.standing.dropped.clear()
        self.standing.dropped.update(progress.get("dropped", []))
        self.journal.restore()
        if self.agents_config.replay:      # replay on from the calls of the iterations done
            done = [e for e in self.events if e.iteration < self.next_iteration]
            self.state.replay_from = {
                "generation": sum(e.kind == "candidate_generated" for e in done),
                "analysis": sum(e.kind == "recommendation" for e in done)}
        self.state.resume_notes = list(notes)

    def add_duel(self, duel: confirm.Duel) -> None:
        """A head-to-head's outcome joins the standing (the samples of a round record on
        other threads)."""
        with self._state_lock:
            if duel.decided:
                self.standing.duels[(duel.attempt.id, duel.rival.id)] = dict(duel.versus)
            if duel.dropped:
                self.standing.dropped.add(duel.dropped)

    def save_state(self) -> None:
        """Rewrite run.json with where the run stands now (saved.py)."""
        with self._state_lock:
            saved.write_state(self, self.state.status)

    _save_state = save_state     # the name the ties' tests use

    def _finish(self, finish: Finish | None) -> None:
        """The end of a run, as `finish` says: the `finished` event, best_candidate.py,
        run.json."""
        self.state.finish = finish
        best = self.best
        self._closing = True
        self.journal.emit(
            "finished", self.history[-1].iteration if self.history else 0,
            reason=self.finish_reason, finish_kind=finish.kind if finish else None,
            best={"iteration": best.iteration, "sample": best.sample, "code": best.code,
                  "result": best.result.to_dict()} if best else None,
            iterations=len({a.iteration for a in self.history}),
            usage=self.ledger.as_dict(), artifacts=str(self.folder), advice=self.advice())
        if best:
            # its first line the flags it was judged with: kforge eval --as-judged reads them
            artifacts.write_text(self.folder / "best_candidate.py",
                                 export.judged_line(self, best) + best.code)
        if self.state.status != "interrupted":
            self.state.status = "finished"
        self.save_state()
        self._done.set()


def with_allowed(options: EvalOptions, ops: list[str]) -> EvalOptions:
    """The options with these torch ops allowed (those the builtin agent keeps on purpose)."""
    rails = dataclasses.replace(options.guardrails,
                                allow=[*options.guardrails.allow, *ops])
    return dataclasses.replace(options, guardrails=rails)
