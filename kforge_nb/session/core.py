"""The loop behind `%%kforge` and `kforge run`: generate, evaluate, analyse, decide, repeat.

    functional pass:   generate -> evaluate -> (fix with the verdict's feedback) ... until correct
    optimisation pass: analyse the best candidate -> ONE recommendation -> decision (policy) ->
                       generate with it -> evaluate -> keep the fastest correct candidate
                       (by its speedup vs eager, timed beside it: records.Attempt.speed)
                       (or the best by your --objective, see measures.py)

Ties are ties: a candidate takes the best's place only when it is faster and their 95 %
intervals separate (its low end above the best's high end, see intervals.compare); otherwise
the earlier stays best and the candidate is marked a tie (`Session.ties`). The final judging
(--confirm) may still overturn. Code identical to an earlier candidate's, comments and blank
lines aside (records.normalised_code), is not judged again: it gets the earlier's verdict and
`same_as` its id.

Each round asks for `samples` candidates, evaluated concurrently (timings are serialised by the
evaluator). Budgets: iterations, wall time, tokens, cost, a target speedup, and K rounds without
improvement. The session emits events and never draws anything; UIs subscribe.

Its state is saved in the run folder as it goes (see saved.py): an interrupted run is listed by
`kforge runs` and continued by `Session.resume(folder)` without redoing finished iterations.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from .. import artifacts, intervals, measures
from ..agents import AgentConfig, make_agents
from ..agents.base import AnalysisRequest, Generation, GenerationRequest, Recommendation, Usage
from ..agents.feedback import profile_summary, why_slower_than_eager
from ..evaluator import EvalOptions
from ..executors import Executor, ExecutorError, InProcess
from ..problem import Problem, ProblemError
from ..providers import ProviderError
from ..result import CORRECT, GENERATION_FAILURE, Result
from ..targets import get_target
from .decisions import ACCEPT, EDIT, REDIRECT, SKIP, STOP, AutoPolicy, Decision, QueuePolicy
from .events import Event
from .inputs import load_translation, parse_aux
from .records import Attempt, Budget, History, normalised_code
from .search import Branch, Crossover, Tree, make_search
from . import confirm, saved


def sample_temperature(chosen, rank: int, samples: int) -> float | None:
    """The temperature a model is asked at for the sample of rank `rank` in its branch, where
    its provider takes one: the user's list (--temperatures), cycled; else, with several
    samples, evenly from 1.0 (what a lone sample gets from OpenAI-compatible models) down to
    0.2, so that the first sample asks as one would and the others grow more careful; one
    sample: the model's default."""
    if chosen:
        return chosen[rank % len(chosen)]
    if samples < 2:
        return None
    return round(1.0 - 0.8 * (rank % samples) / (samples - 1), 3)


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
        self.problem, self.target = problem, get_target(target)
        self.agents_config = agents or AgentConfig()
        self.budget = budget or Budget()
        self.options = options or EvalOptions()
        self.executor = executor or InProcess()      # where candidates are judged
        self.mode = mode
        self.policy = policy or (QueuePolicy() if mode == "review" else AutoPolicy())
        self.search = make_search(search or "greedy") if isinstance(search, str) or \
            search is None else search           # which candidates a round expands
        self.pinned: set[str] = set()        # ids the person wants expanded every round
        self.pruned: set[str] = set()        # ids whose branch is never expanded again
        self.finished_branches: set[str] = set()   # ids the analyst had nothing more for
        self.confirmed: dict[str, float] = {}    # finalists' median speedups (the final judging)
        self.outranked: set[str] = set()         # correct candidates that were not finalists
        self.aux_specs = list(aux or [])
        self.aux = [parse_aux(spec) for spec in self.aux_specs]
        self.translate_from = load_translation(translate_from)
        # a resumed run goes on in its own folder
        self.folder = Path(folder) if folder else \
            artifacts.new_folder(out, f"{problem.name}-{self.target.name}")
        self.options.out_dir = self.folder
        self.history: History = History()
        self._standing_cache: tuple | None = None     # (key, best, ties), see _standing
        self._code_keys: dict[str, str | None] = {}   # attempt id -> its normalised code
        self._judging: dict[str, threading.Event] = {}   # normalised codes being judged now
        self._same_lock = threading.Lock()
        self._manual_slots: set[tuple[int, int]] = set()   # hand-judged ids being judged
        self._manual_lock = threading.Lock()
        self.events: list[Event] = []
        self.usage = Usage()
        self._usage_lock = threading.Lock()
        self._in_flight = 0                  # generation calls under way (budget reservations)
        self._largest_call = Usage()         # the largest single call so far, as an estimate
        self._subscribers: list[Callable[[Event], None]] = []
        self._stop = threading.Event()
        self._done = threading.Event()
        self._closing = False        # set before `finished` is emitted: views see the end
        self._last_recommendation: Recommendation | None = None
        self._agreed = False                 # a person accepted the analyst's "nothing more"
        self._thread: threading.Thread | None = None
        self._clock = clock                  # wall-time budget; tests pass a scripted clock
        self._started: float | None = None
        self._elapsed_before = 0.0           # run time of the earlier runs of a resumed session
        self._state_lock = threading.Lock()
        self._status = ""                    # run.json's: "" before the run, running, finished
        self.next_iteration = 0              # the first iteration not yet done
        self.stale_rounds = 0                # optimisation rounds without improvement
        self.config = saved.config_of(self)
        self._resume_notes: list[str] = []
        self.finish_reason = ""
        self.error: str | None = None
        self.generator = self.analyst = None
        self.provider_description = ""

    # --- public API ---------------------------------------------------------------------------
    @classmethod
    def resume(cls, folder: str | Path, policy=None, mode: str | None = None,
               **budget_changes) -> "Session":
        """The saved run in `folder`, ready to go on from its next iteration (see saved.py)."""
        return saved.resume(folder, policy, mode, **budget_changes)

    def subscribe(self, callback: Callable[[Event], None], replay: bool = True) -> None:
        """Follow the session; a view that subscribes late (or to a resumed run) is first shown
        what happened, unless `replay` is False."""
        with self._emit_lock:
            past = list(self.events) if replay else []
            self._subscribers.append(callback)
        for event in past:
            _deliver(callback, event)

    @property
    def best(self) -> Attempt | None:
        return self._standing()[0]

    @property
    def ties(self) -> dict[str, str]:
        """Candidates that were faster than the best of their time on their point estimate
        but whose intervals overlapped its: {candidate id: the id it tied with}."""
        return dict(self._standing()[1])

    def _standing(self) -> tuple[Attempt | None, dict[str, str]]:
        """The best and the ties, walking the correct candidates in id order: a candidate
        takes the best's place only when it beats it (the objective, or the final judging's
        median, where those rank it; else intervals.compare: faster with separate intervals).
        A candidate with an earlier one's code (same_as) does not compete."""
        history = list(self.history)
        key = (id(self.history), len(history), tuple(sorted(self.confirmed.items())),
               tuple(sorted(self.outranked)), self.options.objective)
        cached = self._standing_cache
        if cached is not None and cached[0] == key:
            return cached[1], cached[2]
        correct = sorted((a for a in history if a.result.state == CORRECT and not a.same_as),
                         key=lambda a: (a.iteration, a.sample))
        best, ties = None, {}
        for attempt in correct:
            if best is None:
                best = attempt
                continue
            mine, theirs = self._point_rank(attempt), self._point_rank(best)
            if mine[0] == 0 or theirs[0] == 0 or self.confirmed:
                if mine < theirs:
                    best = attempt
                continue
            verdict = intervals.compare(attempt.result.timing, best.result.timing)
            if verdict == "better":
                best = attempt
            elif verdict == "tie":
                ties[attempt.id] = best.id
        self._standing_cache = (key, best, ties)
        return best, ties

    def _point_rank(self, attempt: Attempt) -> tuple:
        """Lower ranks first: by the objective (--objective) where the candidate has that
        measure, ahead of those without it, which rank by speed as always."""
        score = measures.score(attempt.result, self.options.objective)
        if score is not None:
            return (0, score)
        # after the final judging, the finalists rank by their median (and ahead of the
        # candidates that did not make it); a candidate judged later competes as measured
        median = self.confirmed.get(attempt.id)
        return (1, attempt.id in self.outranked, 1.0 / median if median else attempt.speed)

    def _rank(self, attempt: Attempt) -> tuple:
        """The order the search expands candidates in: the point ranks, with the best (ties
        are ties: see _standing) ahead of those ranked by speed, and a repeat of an earlier
        candidate's code (same_as) behind every other."""
        rank = self._point_rank(attempt)
        if rank[0] == 0:
            return rank
        return (1, bool(attempt.same_as), rank[1], attempt is not self.best, *rank[2:])

    @property
    def confirm_count(self) -> int:
        """Finalists of the final judging: --confirm, else 3 for beam and evolve (they judge
        many candidates, so their fastest measured is the likeliest fluke) and 0 for greedy."""
        if self.budget.confirm is not None:
            return self.budget.confirm
        return confirm.DEFAULT_WIDE if self.search.width > 1 else 0

    @property
    def running(self) -> bool:
        return self._thread is not None and not self._closing

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
        self._emit("steer", attempt.iteration, action=verb if on else f"un{verb}",
                   id=attempt.id, pinned=sorted(self.pinned), pruned=sorted(self.pruned))
        self._save_state()

    def tree(self) -> Tree:
        """The attempts as a search tree, with the pins and prunes (see search.py)."""
        return Tree(list(self.history), self.pinned, self.pruned, self.finished_branches)

    def evaluate_code(self, code: str, label: str = "manual") -> Attempt:
        """Judge a hand-written or hand-edited candidate and add it to the history. It joins
        the iteration under way (the last one once the run has ended) with a sample number
        above the agent's samples, so its id and folder never collide with an agent's. Code
        that repeats a judged candidate's (comments and blank lines aside) is not judged again:
        the new attempt takes its verdict and says `same_as` it."""
        iteration, sample = self._manual_slot()
        try:
            return self._evaluate(code, iteration, sample, None, label)
        finally:
            with self._manual_lock:
                self._manual_slots.discard((iteration, sample))

    def _manual_slot(self) -> tuple[int, int]:
        with self._manual_lock:
            iteration = self.next_iteration if self.running or not self.history \
                else self.history[-1].iteration
            taken = [a.sample for a in self.history if a.iteration == iteration]
            taken += [s for i, s in self._manual_slots if i == iteration]
            sample = max([self._agent_samples() - 1, *taken]) + 1
            self._manual_slots.add((iteration, sample))
            return iteration, sample

    def _agent_samples(self) -> int:
        """The most candidates the agent asks for in one round."""
        return self.search.width * max(1, self.budget.samples)

    def export(self, path: str | Path, attempt: Attempt | None = None) -> Path:
        """Write the best (or the given) candidate as a standalone .py; see kforge_nb/export.py."""
        from ..export import export
        return export(self, path, attempt)

    def summary(self) -> dict:
        best = self.best
        t = best.result.timing if best else None
        return {
            "problem": self.problem.name, "target": self.target.name,
            "device": self.target.device(),
            "provider": self.provider_description, "reason": self.finish_reason,
            "best_state": best.result.state if best else (
                self.history[-1].result.state if self.history else None),
            "best_iteration": best.iteration if best else None,
            "candidate_ms": t.candidate_ms if t else None,
            "speedup_vs_eager": t.speedup_vs_eager if t else None,
            "speedup_vs_compile": t.speedup_vs_compile if t else None,
            "speedup_vs_eager_ci": t.speedup_vs_eager_ci if t else None,
            "speedup_vs_compile_ci": t.speedup_vs_compile_ci if t else None,
            "noisy": t.noisy if t else False, "noise_note": t.noise_note if t else "",
            "busy": t.busy if t else False, "busy_note": t.busy_note if t else "",
            "speedup_vs_eager_policy": t.speedup_vs_eager_policy if t else None,
            "speedup_vs_compile_policy": t.speedup_vs_compile_policy if t else None,
            "timing_real": t.real if t else None,
            "iterations": len({a.iteration for a in self.history}),
            "candidates": len(self.history),
            "input_tokens": self.usage.input_tokens, "output_tokens": self.usage.output_tokens,
            "cost_usd": round(self.usage.cost_usd, 4),
            "unpriced_calls": self.usage.unpriced_calls,
            "elapsed_s": round(self.elapsed(), 2),
            "artifacts": str(self.folder), "error": self.error,
            "advice": self.advice(),
            "measures": best.result.measures if best else {},
        }

    def advice(self) -> str | None:
        """Said plainly when the best kernel is slower than PyTorch: keep the module as it is,
        and why (the analyst's reason when it gave one, else one read off the profile)."""
        best = self.best
        t = best.result.timing if best else None
        if t is None or not t.real or t.speedup_vs_eager is None or t.speedup_vs_eager >= 1.0:
            return None
        last = self._last_recommendation
        reason = last.action.get("why") if last and \
            last.action.get("verdict") == "keep_pytorch" else None
        # the run may end (patience, budget) before the analyst says why: read it off the profile
        reason = reason or why_slower_than_eager(profile_summary(best.result))
        return (f"best left in PyTorch: the best candidate runs at {intervals.timing_speedup(t)} "
                f"eager ({reason})")

    def elapsed(self) -> float:
        """Seconds this session has run, the earlier runs of a resumed one included."""
        now = self._clock() - self._started if self._started is not None else 0.0
        return self._elapsed_before + now

    # --- the loop -----------------------------------------------------------------------------
    def run(self) -> Attempt | None:
        self._started = self._clock()
        try:
            self._setup()
            self._loop()
            self._confirm()
        except ProviderError as err:
            self.error = str(err)
            self.finish_reason = f"provider error: {err}"
            self._emit("notice", 0, text=str(err))
        except (ProblemError, FileNotFoundError) as err:
            self.error = str(err)
            self.finish_reason = f"bad input: {err}"
            self._emit("notice", 0, text=str(err))
        except ExecutorError as err:      # the engine, not the problem or the candidate
            self.error = str(err)
            self.finish_reason = f"engine error: {err}"
            self._emit("notice", 0, text=str(err))
        except KeyboardInterrupt:     # Ctrl-C in `kforge run`: saved as interrupted, resumable
            self.finish_reason = "interrupted (Ctrl-C)"
            self._status = "interrupted"
            raise
        except Exception as err:  # a bug must end the session visibly, not hang a notebook
            self.error = f"{type(err).__name__}: {err}"
            self.finish_reason = f"internal error: {self.error}"
            artifacts.write_text(self.folder / "error.txt", traceback.format_exc())
            self._emit("notice", 0, text=f"kforge stopped on an internal error: {self.error} "
                       f"(traceback in {self.folder / 'error.txt'})")
        finally:
            self._finish()
        return self.best

    def _setup(self) -> None:
        config = self.agents_config
        config.precision = self.options.precision
        self.generator, self.analyst, self.provider_description, notices = make_agents(config)
        for notice in notices:
            self._emit("notice", 0, text=notice)
        if "compile" in self.options.baselines:
            self._emit("notice", 0, text="the first evaluation also measures the reference "
                       "(eager and torch.compile; a first torch.compile can take ~30 s on a "
                       "small CPU); it is cached per problem and device")
        available = self.target.availability()
        self._emit("started", self.next_iteration, problem=self.problem.name,
                   target=self.target.name,
                   device=self.target.device() if available.runs else available.reason,
                   provider=self.provider_description, model=config.model,
                   analysis_model=config.analysis_model, iterations=self.budget.iterations,
                   samples=self.budget.samples, search=self.search.name,
                   width=self.search.width, mode=self.mode, artifacts=str(self.folder),
                   timing_note=self.target.timing_note(), resumed_at=self.next_iteration)
        for note in self._resume_notes:
            self._emit("notice", self.next_iteration, text=note)
        self._status = "running"
        self._save_state()

    def _loop(self) -> None:
        for iteration in range(self.next_iteration, self.budget.iterations):
            reason = self._over_budget()
            if reason:
                self.finish_reason = reason
                return
            best_before = self.best
            if best_before is None:
                plans = self._functional_plans()
                self._emit("iteration_started", iteration, phase="functional",
                           kind=plans[0].kind)
                if not self._round(iteration, plans, functional=True):
                    self.finish_reason = self._budget_too_small()
                    return
            else:
                branches = self.search.branches(self.tree(), self._rank, iteration)
                if not branches:
                    self.finish_reason = self._nothing_to_expand()
                    return
                plans: list[Plan] = []
                # asked in the order of the parents' ids, not of their ranks: a replay on
                # another machine (other timings) asks in the same order, with the same
                # "being tried elsewhere" in each prompt
                branches.sort(key=lambda b: (b.parent is None, b.parent and
                                             (b.parent.iteration, b.parent.sample)))
                for slot, branch in enumerate(branches):
                    plan = self._plan(branch, iteration, slot, [p.recommendation.title
                                                                for p in plans if p.recommendation])
                    if self.finish_reason:          # stopped, or the budget ran out
                        return
                    if plan is not None:
                        plans.append(plan)
                if not plans and not self.search.branches(self.tree(), self._rank, iteration):
                    self.finish_reason = self._nothing_to_expand()
                    return
                if plans:
                    self._emit("iteration_started", iteration, phase="optimisation",
                               kind="optimise", parents=[p.base.id if p.base else None
                                                         for p in plans])
                    if not self._round(iteration, plans):
                        self.finish_reason = self._budget_too_small()
                        return
                    improved = self.best is not best_before
                    self.stale_rounds = 0 if improved else self.stale_rounds + 1
                    if self.budget.patience and self.stale_rounds >= self.budget.patience:
                        self._iteration_done(iteration)
                        self.finish_reason = f"{self.stale_rounds} rounds without improvement"
                        return
            self._iteration_done(iteration)
            if self.budget.iterations == 1 or self._stop.is_set():
                break
        self.finish_reason = self.finish_reason or (
            "stopped by the user" if self._stop.is_set() else "iteration budget used")

    def _confirm(self) -> None:
        """The final judging (confirm.py): the fastest few judged again side by side."""
        if self._stop.is_set() or self.confirm_count < 2:
            return
        before = self.best
        if before is None or self._rank(before)[0] == 0:      # ranked by an --objective
            return
        chosen = confirm.finalists(list(self.history), self._rank, self.confirm_count)
        if len(chosen) < 2:
            return
        iteration = self.history[-1].iteration
        self._emit("confirming", iteration, finalists=[a.id for a in chosen],
                   rounds=confirm.ROUNDS)

        def go_on() -> bool:
            over = self.budget.wall_s and self.elapsed() > self.budget.wall_s
            return not self._stop.is_set() and not over

        judged = confirm.judge_again(chosen, self._judge_again, go_on)
        if not any(j.median for j in judged):     # stopped before a finalist was judged whole
            self._emit("notice", iteration, text="final judging cut short: the best stays as "
                       "measured")
            return
        with self._state_lock:
            self.confirmed = {j.attempt.id: j.median for j in judged if j.median}
            self.outranked = {a.id for a in self.history if a.result.state == CORRECT
                              and a.id not in self.confirmed}
        best = self.best
        self._emit("confirmed", iteration, judged=[j.to_dict() for j in judged],
                   best=best.id, before=before.id)
        self._save_state()

    def _judge_again(self, attempt: Attempt, round_: int) -> Result:
        folder = self.folder / "confirm" / f"{attempt.id}-{round_}"
        options = dataclasses.replace(self._options_for(attempt.generation), ncu=False)
        return self.executor.evaluate(self.problem, attempt.code, self.target, options, folder)

    def _options_for(self, generation: Generation | None, parent: str | None = None
                     ) -> EvalOptions:
        """The session's options, with the torch ops the generation kept on purpose allowed,
        and Nsight Compute's counters asked for where the analyst reads them, only if the
        candidate beats its parent (the analyst reads a lineage's best; they cost seconds)."""
        options = self.options
        if generation is not None and generation.kept_ops:
            options = with_allowed(options, generation.kept_ops)
        if self.agents_config.ncu and self.analyst is not None and \
                getattr(self.analyst, "reads_counters", True):
            base = self.tree().by_id.get(parent) if parent else None
            over = base.result.timing.speedup_vs_eager \
                if base is not None and base.result.state == CORRECT else None
            options = dataclasses.replace(options, ncu=True, ncu_over=over)
        return options

    def _functional_plans(self) -> list["Plan"]:
        """No correct candidate yet: fix the last round's failures (one branch each, up to the
        search's width), or write from scratch where none has code."""
        last = [a for a in self.history if a.iteration == self.history[-1].iteration] \
            if self.history else []
        failures = [a for a in reversed(last) if a.code][:self.search.width]
        if failures:
            return [Plan("fix", a) for a in failures]
        base = self.history[-1] if self.history else None   # a generation failure, or none
        return [Plan("initial", base) for _ in range(self.search.width)]

    def _plan(self, branch: Branch, iteration: int, slot: int,
              elsewhere: list[str]) -> "Plan | None":
        """Analyse a branch's parent and decide on the recommendation (the policy: you, in
        review mode); None where the branch is skipped or finished. Sets finish_reason where
        the whole search must end (a stop, a budget)."""
        if branch.parent is None:
            return Plan("initial", None)
        if not self._reserve():              # the analyst's call counts against budgets too
            self.finish_reason = self._budget_too_small()
            return None
        try:
            recommendation = self._recommend(branch.parent, iteration, slot, elsewhere)
        finally:
            self._release()
        done = recommendation.action.get("kind") == "done"
        if done and self.mode != "review":
            self.finished_branches.add(branch.parent.id)
            return None
        # In review mode a person answers every recommendation, "done" included: accepting
        # it ends the branch, a redirect or an edit goes on with their words.
        decision = self.policy.decide(recommendation)
        self._emit("decision", iteration, kind=decision.kind, text=decision.text,
                   parent=branch.parent.id)
        self._save_json(iteration, _slot_file("decision.json", slot),
                        {"kind": decision.kind, "text": decision.text,
                         "parent": branch.parent.id})
        if decision.kind == STOP or self._stop.is_set():
            self.finish_reason = "stopped by the user"
            return None
        if done and decision.kind in (ACCEPT, SKIP):
            self.finished_branches.add(branch.parent.id)
            self._agreed = True
            return None
        if decision.kind == SKIP:
            return None
        instruction = {ACCEPT: recommendation.text, EDIT: decision.text,
                       REDIRECT: decision.text}[decision.kind]
        return Plan("optimise", branch.parent, recommendation, decision, instruction,
                    branch.crossovers)

    def _nothing_to_expand(self) -> str:
        """Why the search has no branch left."""
        last = self._last_recommendation
        if last is not None and last.action.get("kind") == "done" and self.finished_branches:
            agreed = "; you agreed" if self._agreed else ""
            return f"the analyst has nothing further to recommend ({last.title}){agreed}"
        if self.pruned:
            return "every branch is pruned or finished: nothing left to expand"
        return "nothing left to expand"

    def _swept_before(self) -> int:
        """How many extra samples (beside each branch's first) the earlier rounds that
        expanded a candidate asked for: where this round's knob sweep goes on from."""
        parents: dict[int, list[str]] = {}
        for a in self.history:
            if a.kind in ("optimise", "fix") and a.parent:
                parents.setdefault(a.iteration, []).append(a.parent)
        return sum(len(ids) - len(set(ids)) for ids in parents.values())

    def _round(self, iteration: int, plans: list["Plan"], functional: bool = False) -> int:
        """Ask for each plan's samples and judge them, all concurrently; how many could be
        asked for."""
        samples = max(1, self.budget.samples)
        seeds_before = 0 if functional else sum(a.kind == "initial" for a in self.history)
        # A sample's variant says what it tries beside its branch's instruction; the variants
        # are numbered across the round, and on from the earlier rounds', so the extra samples
        # (a builtin knob sweep) try other knobs on each branch and in each round, not the
        # sweep's first steps again. Plan.variation reads the sample's rank in its branch.
        jobs, seeds, swept = [], 0, self._swept_before()
        for plan in plans:
            for k in range(samples):
                if plan.base is None or plan.kind == "initial":   # a seed: every one differs
                    rank = variant = seeds_before + seeds
                    seeds += 1
                else:
                    rank, variant = k, k and k + swept
                jobs.append((len(jobs), plan, rank, variant))
            if plan.base is not None and plan.kind != "initial":
                swept += samples - 1

        def one(job) -> bool:
            sample = job[0]
            if not self._reserve():
                self._emit("notice", iteration, text=f"sample {sample} not asked for: the "
                           "token or cost budget would not cover it")
                return False
            try:
                generate(*job)
            finally:
                self._release()
            return True

        def generate(sample: int, plan: Plan, rank: int, variant: int) -> None:
            base = plan.base
            said, applied = plan.variation(rank)
            request = GenerationRequest(
                problem=self.problem, target=self.target.name, kind=plan.kind,
                iteration=iteration, previous_code=base.code if base else None,
                previous_result=base.result if base else None, instruction=plan.instruction,
                aux=[(name, text) for name, text, only in self.aux
                     if only is None or iteration in only],
                translate_from=self.translate_from, sample=sample, variant=variant,
                precision=self.options.precision, deadline=self._deadline(), variation=said,
                temperature=sample_temperature(self.agents_config.temperatures, rank, samples))
            generation = self.generator.generate(request)
            with self._usage_lock:          # samples of one round finish on several threads
                self.usage = self.usage + generation.usage
                self._largest_call = max(self._largest_call, generation.usage, key=_call_size)
            parent = base.id if base is not None and base.code else None
            self._emit("candidate_generated", iteration, sample=sample, code=generation.code,
                       failure=generation.failure, usage=vars(generation.usage),
                       notes=generation.notes, knowledge=generation.knowledge,
                       variation=generation.variation, temperature=generation.temperature,
                       parent=parent)
            self._save_generation(iteration, sample, generation)
            lineage = dict(parent=parent, applied=applied)
            if generation.code is None:
                result = Result(GENERATION_FAILURE, generation.failure or "no code")
                self._record(Attempt(iteration, sample, plan.kind, None, result, generation,
                                     plan.recommendation, plan.decision, **lineage))
            else:
                self._evaluate(generation.code, iteration, sample, generation, plan.kind,
                               plan.recommendation, plan.decision, **lineage)
        first = 0 if self._largest_call.calls else 1   # a first call alone: its size is the
        asked = [one(job) for job in jobs[:first]]      # estimate the others reserve
        if len(jobs) > first:
            with ThreadPoolExecutor(len(jobs) - first) as pool:
                asked += pool.map(one, jobs[first:])
        return sum(asked)

    def _reserve(self) -> bool:
        """Count one more call in flight if the budget covers it and every call already in
        flight, each reckoned as large as the largest call so far: N concurrent samples
        cannot overshoot a token or cost budget by N-1 calls."""
        with self._usage_lock:
            calls = self._in_flight + 1
            big = self._largest_call
            projected = Usage(self.usage.input_tokens + calls * big.input_tokens,
                              self.usage.output_tokens + calls * big.output_tokens,
                              self.usage.cost_usd + calls * big.cost_usd)
            if self.budget.exhausted(projected, 0.0, None) and (big.calls or self._in_flight):
                return False
            self._in_flight += 1
            return True

    def _budget_too_small(self) -> str:
        big, b = self._largest_call, self.budget
        if b.tokens and self.usage.input_tokens + self.usage.output_tokens + \
                big.input_tokens + big.output_tokens >= b.tokens:
            return (f"token budget ({b.tokens}) would not cover another call "
                    f"({big.input_tokens + big.output_tokens} tokens, the largest so far)")
        return (f"cost budget (${b.cost_usd:g}) would not cover another call "
                f"(${big.cost_usd:.4f}, the largest so far)")

    def _release(self) -> None:
        with self._usage_lock:
            self._in_flight -= 1

    def _evaluate(self, code: str, iteration: int, sample: int, generation: Generation | None,
                  kind: str, recommendation=None, decision=None, parent: str | None = None,
                  applied: Recommendation | None = None) -> Attempt:
        key, earlier = self._claim(code)
        if earlier is not None:       # the same code as a judged candidate: its verdict
            result = Result.from_dict(earlier.result.to_dict())
            attempt = Attempt(iteration, sample, kind, code, result, generation, recommendation,
                              decision, parent, applied=applied, same_as=earlier.id)
            self._record(attempt)
            return attempt
        try:
            folder = self.folder / f"iter-{iteration:02d}" / f"sample-{sample}"
            result = self.executor.evaluate(self.problem, code, self.target,
                                            self._options_for(generation, parent), folder)
            attempt = Attempt(iteration, sample, kind, code, result, generation, recommendation,
                              decision, parent, applied=applied)
            self._record(attempt)
        finally:
            with self._same_lock:
                done = self._judging.pop(key, None)
            if done is not None:
                done.set()
        return attempt

    def _claim(self, code: str) -> tuple[str | None, Attempt | None]:
        """(the code's normalised key, the earlier candidate judged with the same code or
        None). With None the caller judges it, and another sample with the same code waits
        for that verdict rather than being judged beside it."""
        key = normalised_code(code)
        if not key:
            return key, None
        while True:
            with self._same_lock:
                earlier = self._judged_with(key)
                if earlier is not None:
                    return key, earlier
                waiting = self._judging.get(key)
                if waiting is None:
                    self._judging[key] = threading.Event()
                    return key, None
            waiting.wait()

    def _judged_with(self, key: str | None) -> Attempt | None:
        """The first candidate (in the history's order) judged with this normalised code."""
        if not key:
            return None
        for a in list(self.history):
            if not a.code or a.result.state == GENERATION_FAILURE:
                continue
            if a.id not in self._code_keys:
                self._code_keys[a.id] = normalised_code(a.code)
            if self._code_keys[a.id] == key:
                return a
        return None

    def _record(self, attempt: Attempt) -> None:
        with self._state_lock:       # samples finish on several threads; the tree is read whole
            attempt.lineage = self.tree().lineage_of(attempt)
            self.history.append(attempt)
        best, ties = self._standing()
        self._emit("evaluated", attempt.iteration, sample=attempt.sample, code=attempt.code,
                   result=attempt.result.to_dict(), best=best is attempt, kind=attempt.kind,
                   parent=attempt.parent, lineage=attempt.lineage, same_as=attempt.same_as,
                   tie_with=ties.get(attempt.id))
        self._emit("usage", attempt.iteration, **self._usage_dict())
        if self._status:                    # not for a candidate judged before the run starts
            self._save_state()

    def _recommend(self, best: Attempt, iteration: int, slot: int = 0,
                   elsewhere: list[str] = ()) -> Recommendation:
        history = self.search.tried(self.tree(), best)
        request = AnalysisRequest(self.problem, self.target.name, best.code, best.result,
                                  profile_summary(best.result), history, iteration,
                                  deadline=self._deadline(),
                                  objective=measures.objective_text(best.result,
                                                                    self.options.objective),
                                  alternatives=max(0, self.budget.samples - 1),
                                  elsewhere=list(dict.fromkeys(elsewhere)))
        recommendation = self.analyst.analyse(request)
        self._last_recommendation = recommendation
        with self._usage_lock:
            self.usage = self.usage + recommendation.usage
            self._largest_call = max(self._largest_call, recommendation.usage, key=_call_size)
        self._emit("recommendation", iteration, title=recommendation.title,
                   text=recommendation.text, expected_gain=recommendation.expected_gain,
                   usage=vars(recommendation.usage), parent=best.id)
        self._save_json(iteration, _slot_file("recommendation.json", slot), {
            "parent": best.id,
            "title": recommendation.title, "text": recommendation.text,
            "expected_gain": recommendation.expected_gain, "action": recommendation.action,
            "summary": request.summary, "messages": recommendation.messages,
            "response": recommendation.response,
            "images": [_slot_file(picture.file_name, slot)
                       for picture in recommendation.pictures]})
        for picture in recommendation.pictures:     # what the analyst saw, beside its prompt
            artifacts.write_bytes(self.folder / f"iter-{iteration:02d}" /
                                  _slot_file(picture.file_name, slot), picture.png)
        return recommendation

    def _over_budget(self) -> str | None:
        if self._stop.is_set():
            return "stopped by the user"
        return self.budget.exhausted(self.usage, self.elapsed(), self.best)

    def _deadline(self) -> float | None:
        """When the wall-time budget ends, on time.monotonic()'s scale (what providers use to
        decide whether another retry fits)."""
        if not self.budget.wall_s:
            return None
        return time.monotonic() + max(0.0, self.budget.wall_s - self.elapsed())

    def _iteration_done(self, iteration: int) -> None:
        self.next_iteration = max(self.next_iteration, iteration + 1)
        self._save_state()

    def restore(self, run: "saved.SavedRun", notes: list[str] = ()) -> None:
        """Take back a saved run's history, usage, elapsed time and events (see saved.py)."""
        progress = run.data["progress"]
        self.history = History(saved.attempt_from_dict(d) for d in run.data["history"])
        self._standing_cache, self._code_keys = None, {}
        self.usage = saved.usage_from_dict(progress.get("usage", {}))
        self._largest_call = Usage()
        # an iteration with a judged candidate is done (with several samples, some may be
        # missing: they are not asked for again), so nothing judged is judged twice
        # (a hand-judged edit joins an iteration under way: it does not end it)
        agents = [a for a in self.history if a.kind != "manual"]
        self.next_iteration = max([progress["next_iteration"], *(a.iteration + 1 for a in agents)])
        # a run that ended on its own (patience, a provider error, Stop) gets fresh patience
        self.stale_rounds = progress["stale_rounds"] if run.status == "interrupted" else 0
        self.pinned = set(progress.get("pinned", []))
        self.pruned = set(progress.get("pruned", []))
        self.finished_branches = set(progress.get("finished_branches", []))
        self.confirmed = dict(progress.get("confirmed", {}))
        self.outranked = set(progress.get("outranked", []))
        self._elapsed_before = float(progress.get("elapsed_s", 0.0))
        self.events = [e for e in _read_events(self.folder / "events.jsonl")
                       if e.kind != "finished"]
        if self.agents_config.replay:      # replay on from the calls of the iterations done
            done = [e for e in self.events if e.iteration < self.next_iteration]
            self.agents_config.replay_from = {
                "generation": sum(e.kind == "candidate_generated" for e in done),
                "analysis": sum(e.kind == "recommendation" for e in done)}
        self._resume_notes = list(notes)
    def _finish(self) -> None:
        best = self.best
        self._closing = True
        self._emit("finished", self.history[-1].iteration if self.history else 0,
                   reason=self.finish_reason,
                   best={"iteration": best.iteration, "sample": best.sample, "code": best.code,
                         "result": best.result.to_dict()} if best else None,
                   iterations=len({a.iteration for a in self.history}),
                   usage=self._usage_dict(), artifacts=str(self.folder), advice=self.advice())
        if best:
            artifacts.write_text(self.folder / "best_candidate.py", best.code)
        if self._status != "interrupted":
            self._status = "finished"
        self._save_state()
        self._done.set()

    # --- plumbing -----------------------------------------------------------------------------
    def _decide(self, decision: Decision) -> None:
        if not isinstance(self.policy, QueuePolicy):
            raise RuntimeError("this session decides by itself (mode 'auto'); start it with "
                               "mode='review' to accept, edit, redirect or skip by hand")
        self.policy.put(decision)

    def _usage_dict(self) -> dict:
        return {"input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
                "cost_usd": round(self.usage.cost_usd, 6),
                "elapsed_s": round(self.elapsed(), 2)}

    _emit_lock = threading.Lock()

    def _emit(self, event_kind: str, iteration: int, **data) -> None:
        event = Event(event_kind, iteration, data)
        with self._emit_lock:
            self.events.append(event)
            with open(self.folder / "events.jsonl", "a") as f:
                f.write(json.dumps(event.to_dict(), default=str) + "\n")
        for callback in list(self._subscribers):
            _deliver(callback, event)

    def _save_state(self) -> None:
        with self._state_lock:
            saved.write_state(self, self._status)

    def _save_generation(self, iteration: int, sample: int, generation: Generation) -> None:
        folder = self.folder / f"iter-{iteration:02d}" / f"sample-{sample}"
        artifacts.write_json(folder / "prompt.json", generation.messages)
        artifacts.write_text(folder / "response.md", generation.response or "")
        artifacts.write_json(folder / "generation.json", {
            "failure": generation.failure, "usage": vars(generation.usage),
            "notes": generation.notes, "kept_ops": generation.kept_ops,
            "knowledge": generation.knowledge, "variation": generation.variation,
            "temperature": generation.temperature})

    def _save_json(self, iteration: int, name: str, data: dict) -> None:
        artifacts.write_json(self.folder / f"iter-{iteration:02d}" / name, data)


def _call_size(usage: Usage) -> tuple:
    return usage.input_tokens + usage.output_tokens, usage.cost_usd


def _deliver(callback, event: Event) -> None:
    try:
        callback(event)
    except Exception:  # a broken view must not stop the session
        traceback.print_exc()


def _read_events(path: Path) -> list[Event]:
    """A saved events.jsonl; a line cut by a kill is dropped (and the file mended so the next
    event starts on a line of its own)."""
    if not path.is_file():
        return []
    text = path.read_text(errors="replace")
    events = []
    for line in text.splitlines():
        try:
            d = json.loads(line)
            events.append(Event(d["kind"], d.get("iteration", 0), d.get("data", {}),
                                d.get("time", 0.0)))
        except (ValueError, KeyError, TypeError):
            continue
    if text and not text.endswith("\n"):
        with open(path, "a") as f:
            f.write("\n")
    return events


def with_allowed(options: EvalOptions, ops: list[str]) -> EvalOptions:
    """The options with these torch ops allowed (those the builtin agent keeps on purpose)."""
    rails = dataclasses.replace(options.guardrails,
                                allow=[*options.guardrails.allow, *ops])
    return dataclasses.replace(options, guardrails=rails)


def _slot_file(name: str, slot: int) -> str:
    """A round's files for its first branch keep their names; the others' carry the slot."""
    if slot == 0:
        return name
    stem, dot, suffix = name.rpartition(".")
    return f"{stem}-{slot}{dot}{suffix}" if dot else f"{name}-{slot}"


# Samples after the first try something else (#0 takes the instruction as it is): in an
# optimisation round the changes that made other lineages faster (evolve), then the analyst's
# next-ranked changes, else one of these directions.
DIRECTIONS = (
    "Take a different approach from the obvious one: another work decomposition (what one "
    "thread or program computes) and other block or tile sizes.",
    "Minimise memory traffic: fuse every step into as few passes over the data as possible, "
    "even at the cost of recomputing cheap values.",
    "Maximise parallelism and vector width: more, smaller units of work, wide contiguous "
    "loads and stores.",
)


@dataclass
class Plan:
    """One branch of a round, decided: what its samples are asked for, from which parent."""
    kind: str                                   # initial, fix or optimise
    base: Attempt | None                        # the parent (None: from scratch)
    recommendation: Recommendation | None = None
    decision: Decision | None = None
    instruction: str | None = None
    crossovers: list[Crossover] = field(default_factory=list)

    def variation(self, variant: int) -> tuple[str, Recommendation | None]:
        """What sample `variant` of this branch tries instead of repeating sample 0, and the
        change it is asked to make where that is one (the tree's record of what worked)."""
        asked = self.recommendation is not None and \
            (self.decision is None or self.decision.kind == ACCEPT)
        if variant == 0:
            if self.recommendation is None or self.decision is None:
                return "", None
            if asked:
                return "", Recommendation(self.recommendation.title, self.recommendation.text)
            return "", Recommendation(f"your {self.decision.kind}: "
                                      f"{self.decision.text.splitlines()[0][:60]}",
                                      self.decision.text)
        if variant <= len(self.crossovers):         # only an optimise round has them
            cross = self.crossovers[variant - 1]
            return ("Instead of the recommendation above, apply this change; it made "
                    f"candidate {cross.source} {cross.gain:.2f}x faster in another lineage:\n"
                    f"{cross.change.text}"), cross.change
        variant -= len(self.crossovers)
        alternatives = self.recommendation.alternatives if asked else []
        if len(alternatives) >= variant:
            text = alternatives[variant - 1]
            return ("Instead of the recommendation above, apply this other change (the "
                    f"analyst ranked it next):\n{text}"), \
                Recommendation(text.splitlines()[0][:60], text)
        return DIRECTIONS[(variant - 1) % len(DIRECTIONS)], None
