"""The loop behind `%%kforge` and `kforge run`: generate, evaluate, analyse, decide, repeat.

    functional pass:   generate -> evaluate -> (fix with the verdict's feedback) ... until correct
    optimisation pass: analyse the best candidate -> ONE recommendation -> decision (policy) ->
                       generate with it -> evaluate (the best so far timed beside it, in
                       the same rounds) -> keep it only if faster side by side
                       (or the best by your --objective, see measures.py)

Which candidate is best, and which only tied with it, is standing.py's to say; after a round,
candidates compared only indirectly are timed side by side (settle), and the final judging
(--confirm, confirm.py) times the finalists beside the best. Code identical to an earlier candidate's is
not judged again (repeats.py).

Each round asks for `samples` candidates per branch (plans.py), evaluated concurrently (timings
are serialised by the evaluator). Budgets (ledger.py): iterations, wall time, tokens, cost, a
target speedup, and K rounds without improvement.

The run's state is saved in its folder as it goes (saved.py): an interrupted run is listed by
`kforge runs` and continued by `Session.resume(folder)` without redoing finished iterations.
"""
from __future__ import annotations

import contextvars
import dataclasses
import re
import traceback
from concurrent.futures import ThreadPoolExecutor

from .. import artifacts, measures
from ..agents import make_agents
from ..agents.base import AnalysisRequest, GenerationRequest, Recommendation
from ..agents.feedback import profile_summary
from ..agents.history import Outcome, outcomes as outcomes_of
from ..executors import ExecutorError
from ..problem import ProblemError
from ..providers import ProviderError
from ..result import GENERATION_FAILURE, Result
from . import confirm, feasible
from .decisions import ACCEPT, EDIT, REDIRECT, SKIP, STOP
from .journal import slot_file
from .plans import Job, Plan, functional_plans, jobs, sample_temperature
from .records import Attempt
from .search import Branch
from .standing import Standing


class Loop:
    """One run of a session, from its next iteration to the end."""

    def __init__(self, session):
        self.s = session
        self.emit = session.journal.emit
        self.agreed = False          # a person accepted the analyst's "nothing more"

    def run(self) -> Attempt | None:
        s = self.s
        s.ledger.start()
        try:
            self.setup()
            self.rounds()
            self.confirm()
        except ProviderError as err:
            self.stopped_on(err, "provider error")
        except (ProblemError, FileNotFoundError) as err:
            self.stopped_on(err, "bad input")
        except ExecutorError as err:      # the engine, not the problem or the candidate
            self.stopped_on(err, "engine error")
        except KeyboardInterrupt:     # Ctrl-C in `kforge run`: saved as interrupted, resumable
            s.finish_reason = "interrupted (Ctrl-C)"
            s._status = "interrupted"
            raise
        except Exception as err:  # a bug must end the session visibly, not hang a notebook
            s.error = f"{type(err).__name__}: {err}"
            s.finish_reason = f"internal error: {s.error}"
            artifacts.write_text(s.folder / "error.txt", traceback.format_exc())
            self.emit("notice", 0, text=f"kforge stopped on an internal error: {s.error} "
                      f"(traceback in {s.folder / 'error.txt'})")
        finally:
            s._finish()
        return s.best

    def stopped_on(self, err: Exception, what: str) -> None:
        """The run ends on an error the person can act on, said as a notice."""
        self.s.error = str(err)
        self.s.finish_reason = f"{what}: {err}"
        self.emit("notice", 0, text=str(err))

    def setup(self) -> None:
        s, config = self.s, self.s.agents_config
        config.precision = s.options.precision
        s.generator, s.analyst, s.provider_description, notices = make_agents(config)
        refuse_an_unworkable_target(s, notices)
        for notice in notices:
            self.emit("notice", 0, text=notice)
        if "compile" in s.options.baselines:
            self.emit("notice", 0, text="every evaluation times the reference eager and "
                      "torch.compile'd beside the candidate; the first also warms "
                      "torch.compile up, at most once a run (~10-40 s on a small, busy CPU)")
        self.emit("started", s.next_iteration, problem=s.problem.name, target=s.target.name,
                  device=feasible.where_it_runs(s.target),
                  provider=s.provider_description, model=config.model,
                  analysis_model=config.analysis_model, iterations=s.budget.iterations,
                  samples=s.budget.samples, search=s.search.name, width=s.search.width,
                  mode=s.mode, artifacts=str(s.folder), timing_note=s.target.timing_note(),
                  resumed_at=s.next_iteration)
        for note in s._resume_notes:
            self.emit("notice", s.next_iteration, text=note)
        s._status = "running"
        s._save_state()

    # --- rounds -------------------------------------------------------------------------------
    def rounds(self) -> None:
        s = self.s
        for iteration in range(s.next_iteration, s.budget.iterations):
            reason = "stopped by the user" if s._stop.is_set() else s.ledger.exhausted(s.best)
            if reason:
                s.finish_reason = reason
                return
            ended = self.functional(iteration) if s.best is None else self.optimise(iteration)
            if ended:
                return
            self.iteration_done(iteration)
            if s.budget.iterations == 1 or s._stop.is_set():
                break
        s.finish_reason = s.finish_reason or (
            "stopped by the user" if s._stop.is_set() else "iteration budget used")

    def functional(self, iteration: int) -> bool:
        """A round of the functional pass; whether the run ends."""
        plans = functional_plans(self.s.history, self.s.search.width)
        self.emit("iteration_started", iteration, phase="functional", kind=plans[0].kind)
        if not self.round(iteration, plans, functional=True):
            self.s.finish_reason = self.s.ledger.too_small()
            return True
        self.settle(iteration)
        return False

    def optimise(self, iteration: int) -> bool:
        """A round of the optimisation pass; whether the run ends."""
        s = self.s
        best_before = s.best
        branches = s.search.branches(s.tree(), s._rank, iteration)
        if not branches:
            s.finish_reason = self.nothing_to_expand()
            return True
        plans = self.plans(branches, iteration)
        if s.finish_reason:                 # stopped, or the budget ran out
            return True
        if not plans and not s.search.branches(s.tree(), s._rank, iteration):
            s.finish_reason = self.nothing_to_expand()
            return True
        if not plans:
            return False
        self.emit("iteration_started", iteration, phase="optimisation", kind="optimise",
                  parents=[p.base.id if p.base else None for p in plans])
        if not self.round(iteration, plans):
            s.finish_reason = s.ledger.too_small()
            return True
        self.settle(iteration)
        s.stale_rounds = 0 if s.best is not best_before else s.stale_rounds + 1
        if s.budget.patience and s.stale_rounds >= s.budget.patience:
            self.iteration_done(iteration)
            s.finish_reason = f"{s.stale_rounds} rounds without improvement"
            return True
        return False

    def iteration_done(self, iteration: int) -> None:
        self.s.next_iteration = max(self.s.next_iteration, iteration + 1)
        self.s._save_state()

    def nothing_to_expand(self) -> str:
        """Why the search has no branch left."""
        s, last = self.s, self.s._last_recommendation
        if last is not None and last.action.get("kind") == "done" and s.finished_branches:
            agreed = "; you agreed" if self.agreed else ""
            return f"the analyst has nothing further to recommend ({unnested(last.title)}){agreed}"
        if s.pruned:
            return "every branch is pruned or finished: nothing left to expand"
        return "nothing left to expand"

    # --- plans --------------------------------------------------------------------------------
    def plans(self, branches: list[Branch], iteration: int) -> list[Plan]:
        """The round's plans, one per branch not skipped; stops asking once the run must end
        (finish_reason set)."""
        plans: list[Plan] = []
        # asked in the order of the parents' ids, not of their ranks: a replay on another
        # machine (other timings) asks in the same order, with the same "being tried
        # elsewhere" in each prompt
        branches.sort(key=lambda b: (b.parent is None, b.parent and
                                     (b.parent.iteration, b.parent.sample)))
        for slot, branch in enumerate(branches):
            plan = self.plan(branch, iteration, slot,
                             [p.recommendation.title for p in plans if p.recommendation])
            if self.s.finish_reason:
                return plans
            if plan is not None:
                plans.append(plan)
        return plans

    def plan(self, branch: Branch, iteration: int, slot: int,
             elsewhere: list[str]) -> Plan | None:
        """Analyse a branch's parent and decide on the recommendation (the policy: you, in
        review mode); None where the branch is skipped or finished. Sets finish_reason where
        the whole search must end (a stop, a budget)."""
        s, parent = self.s, branch.parent
        if parent is None:
            return Plan("initial", None)
        if not s.ledger.reserve():           # the analyst's call counts against budgets too
            s.finish_reason = s.ledger.too_small()
            return None
        try:
            recommendation = self.recommend(parent, iteration, slot, elsewhere)
        finally:
            s.ledger.release()
        done = recommendation.action.get("kind") == "done"
        if done and s.mode != "review":
            s.finished_branches.add(parent.id)
            return None
        # In review mode a person answers every recommendation, "done" included: accepting
        # it ends the branch, a redirect or an edit goes on with their words.
        decision = s.policy.decide(recommendation)
        self.emit("decision", iteration, kind=decision.kind, text=decision.text,
                  parent=parent.id)
        s.journal.save_json(iteration, slot_file("decision.json", slot),
                            {"kind": decision.kind, "text": decision.text, "parent": parent.id})
        if decision.kind == STOP or s._stop.is_set():
            s.finish_reason = "stopped by the user"
            return None
        if done and decision.kind in (ACCEPT, SKIP):
            s.finished_branches.add(parent.id)
            self.agreed = True
            return None
        if decision.kind == SKIP:
            return None
        instruction = {ACCEPT: recommendation.text, EDIT: decision.text,
                       REDIRECT: decision.text}[decision.kind]
        return Plan("optimise", parent, recommendation, decision, instruction,
                    branch.crossovers)

    def recommend(self, best: Attempt, iteration: int, slot: int = 0,
                  elsewhere: list[str] = ()) -> Recommendation:
        s = self.s
        request = AnalysisRequest(s.problem, s.target.name, best.code, best.result,
                                  profile_summary(best.result), s.search.tried(s.tree(), best),
                                  iteration, deadline=s.ledger.deadline(),
                                  objective=measures.objective_text(best.result,
                                                                    s.options.objective),
                                  alternatives=max(0, s.budget.samples - 1),
                                  elsewhere=list(dict.fromkeys(elsewhere)),
                                  candidate=best.id, outcomes=self.outcomes(iteration))
        recommendation = s.analyst.analyse(request)
        s._last_recommendation = recommendation
        s.ledger.add(recommendation.usage)
        self.emit("recommendation", iteration, title=recommendation.title,
                  text=recommendation.text, expected_gain=recommendation.expected_gain,
                  usage=vars(recommendation.usage), parent=best.id)
        s.journal.save_recommendation(iteration, slot, best.id, recommendation, request.summary)
        return recommendation

    def outcomes(self, iteration: int) -> list[Outcome]:
        """The earlier rounds' attempts and what came of them, for an agent's prompt."""
        s = self.s
        return outcomes_of(list(s.history),
                           lambda shown: Standing(s.options, s.standing.duels,
                                                  s.standing.dropped).of(shown)[0],
                           iteration)

    # --- a round's samples --------------------------------------------------------------------
    def round(self, iteration: int, plans: list[Plan], functional: bool = False) -> int:
        """Ask for each plan's samples and judge them, all concurrently; how many could be
        asked for."""
        s = self.s
        todo = jobs(plans, max(1, s.budget.samples), s.history, functional)

        def one(job: Job) -> bool:
            if not s.ledger.reserve():
                self.emit("notice", iteration, text=f"sample {job.sample} not asked for: the "
                          "token or cost budget would not cover it")
                return False
            try:
                self.generate(iteration, job)
            finally:
                s.ledger.release()
            return True

        first = 0 if s.ledger.sized else 1     # a first call alone: its size is the
        asked = [one(job) for job in todo[:first]]      # estimate the others reserve
        if len(todo) > first:
            with ThreadPoolExecutor(len(todo) - first) as pool:
                asked += pool.map(in_this_context(one), todo[first:])
        return sum(asked)

    def generate(self, iteration: int, job: Job) -> None:
        """Ask for one sample and judge it."""
        s, plan, base = self.s, job.plan, job.plan.base
        samples = max(1, s.budget.samples)
        said, applied = plan.variation(job.rank)
        request = GenerationRequest(
            problem=s.problem, target=s.target.name, kind=plan.kind,
            iteration=iteration, previous_code=base.code if base else None,
            previous_result=base.result if base else None, instruction=plan.instruction,
            action=plan.accepted_action(),
            aux=[(name, text) for name, text, only in s.aux
                 if only is None or iteration in only],
            translate_from=s.translate_from, sample=job.sample, variant=job.variant,
            precision=s.options.precision, deadline=s.ledger.deadline(), variation=said,
            temperature=sample_temperature(s.agents_config.temperatures, job.rank, samples),
            parent=base.id if base is not None and base.code else None,
            outcomes=self.outcomes(iteration))
        generation = s.generator.generate(request)
        s.ledger.add(generation.usage)
        parent = base.id if base is not None and base.code else None
        self.emit("candidate_generated", iteration, sample=job.sample, code=generation.code,
                  failure=generation.failure, usage=vars(generation.usage),
                  notes=generation.notes, knowledge=generation.knowledge,
                  variation=generation.variation, temperature=generation.temperature,
                  parent=parent)
        s.journal.save_generation(iteration, job.sample, generation)
        lineage = dict(parent=parent, applied=applied)
        if generation.code is None:
            result = Result(GENERATION_FAILURE, generation.failure or "no code")
            s._record(Attempt(iteration, job.sample, plan.kind, None, result, generation,
                              plan.recommendation, plan.decision, **lineage))
        else:
            s._evaluate(generation.code, iteration, job.sample, generation, plan.kind,
                        plan.recommendation, plan.decision, **lineage)

    # --- deciding duels -----------------------------------------------------------------------
    def settle(self, iteration: int) -> None:
        """After a round: where a candidate stands above or level with the best only by an
        indirect comparison (samples timed beside the same earlier best, or judgings without a
        rival), the two are timed side by side (confirm.py) before it counts."""
        s = self.s
        tried: set[tuple[str, str]] = set()
        while not s._stop.is_set() and not (s.budget.wall_s and s.elapsed() > s.budget.wall_s):
            s.best                                 # the walk that lists what is undecided
            pairs = [p for p in s.standing.undecided if p not in tried]
            if not pairs:
                return
            tried.add(pairs[0])
            by_id = {a.id: a for a in s.history}
            duel = confirm.fight(by_id[pairs[0][0]], by_id[pairs[0][1]], self.duel)
            self.record_duel(duel, iteration)

    def duel(self, attempt: Attempt, rival: Attempt) -> Result:
        """`attempt` judged again with `rival` timed beside it, in a folder of its own."""
        s = self.s
        folder = s.folder / "duels" / f"{attempt.id}-vs-{rival.id}"
        options = dataclasses.replace(s.rival_options(s._options_for(attempt.generation), rival),
                                      ncu=False)
        return s.executor.evaluate(s.problem, attempt.code, s.target, options, folder)

    def record_duel(self, duel: confirm.Duel, iteration: int) -> None:
        s = self.s
        with s._state_lock:
            if duel.decided:
                s.standing.duels[(duel.attempt.id, duel.rival.id)] = dict(duel.versus)
            if duel.dropped:
                s.standing.dropped.add(duel.dropped)
        self.emit("duel", iteration, **duel.to_dict(), best=s.best.id if s.best else None,
                  text=confirm.duel_text(duel.to_dict()))
        s._save_state()

    # --- the final judging --------------------------------------------------------------------
    def confirm(self) -> None:
        """The final judging (confirm.py): the best few each timed again beside the best."""
        s = self.s
        if s._stop.is_set() or s.confirm_count < 2:
            return
        before = s.best
        if before is None or s._rank(before)[0] == 0:      # ranked by an --objective
            return
        chosen = confirm.finalists(list(s.history), s._rank, s.confirm_count)
        if len(chosen) < 2:
            return
        iteration = s.history[-1].iteration
        self.emit("confirming", iteration, finalists=[a.id for a in chosen],
                  rounds=confirm.ROUNDS)
        judged, fought = [], set()
        while not s._stop.is_set() and not (s.budget.wall_s and s.elapsed() > s.budget.wall_s):
            best = s.best
            todo = [a for a in chosen if a is not best and (a.id, best.id) not in fought]
            if not todo:
                break
            fought.update({(todo[0].id, best.id), (best.id, todo[0].id)})
            duel = confirm.fight(todo[0], best, self.duel)
            chosen = [a for a in chosen if a.id != duel.dropped]
            self.record_duel(duel, iteration)
            judged.append(duel.to_dict())
        if not judged:
            self.emit("notice", iteration, text="final judging cut short: the best stays as "
                      "measured")
            return
        self.emit("confirmed", iteration, judged=judged, best=s.best.id, before=before.id)
        s._save_state()


def unnested(title: str) -> str:
    """A title said inside parentheses, its own parentheses made commas: "no further change
    expected (round 4)" -> "no further change expected, round 4"."""
    return re.sub(r"\s*\(([^()]*)\)", r", \1", title)


def in_this_context(fn):
    """`fn`, run on a pool's thread in a copy of the caller's context (the retry listener of
    providers/retry.py goes with it)."""
    context = contextvars.copy_context()
    return lambda *args: context.copy().run(fn, *args)


def refuse_an_unworkable_target(s, notices: list[str]) -> None:
    """Before any iteration: a target the agent cannot write, or whose candidates could be
    neither run nor compiled here, ends the run with the reason (feasible.py)."""
    why = feasible.refusal(feasible.written_targets(s.generator), s.target, s.executor)
    if why:
        raise feasible.TargetError(" ".join([why, *notices]))
