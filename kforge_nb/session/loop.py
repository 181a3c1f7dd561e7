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
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor

from .. import artifacts, measures
from ..agents import make_agents
from ..agents.base import AnalysisRequest, GenerationRequest, Recommendation
from ..agents.feedback import profile_summary
from ..agents.history import Outcome, outcomes as outcomes_of
from ..baselines import long_name
from ..executors import Executor, ExecutorError
from ..problem import ProblemError
from ..providers import ProviderError
from ..result import GENERATION_FAILURE, Result
from . import confirm, feasible
from .decisions import ACCEPT, EDIT, REDIRECT, SKIP, STOP
from .finish import (BAD_INPUT, BUDGET, ENGINE_ERROR, INTERNAL_ERROR, ITERATIONS_USED,
                     NOTHING_TO_TRY, PATIENCE, PROVIDER_ERROR, STOPPED_BY_USER, Finish,
                     on_error, out_of_budget, same_failure_again)
from .journal import Journal, slot_file
from .ledger import Ledger
from .plans import Job, Plan, functional_plans, jobs, sample_temperature
from .records import Attempt, Budget
from .search import Branch
from .spec import RunSpec, RunState, agents_for
from .standing import Standing


class Loop:
    """One run of a session, from its next iteration to the end; `run()` says how it ended.

    It is handed what it works with: the spec (what was asked), the run's state, the ledger,
    the journal, the search, the policy (who decides), the executor (who judges) and the stop
    flag. `session` keeps the candidates: their history, which is best (its standing), judging
    and recording them."""

    def __init__(self, session, spec: RunSpec, state: RunState, ledger: Ledger,
                 journal: Journal, search, policy, executor: Executor, stop: threading.Event):
        self.session, self.spec, self.state = session, spec, state
        self.ledger, self.journal, self.search, self.policy = ledger, journal, search, policy
        self.executor, self.stop = executor, stop
        self.emit = journal.emit
        self.agreed = False          # a person accepted the analyst's "nothing more"
        self.ending: Finish | None = None   # set where asking for plans must end the run

    def run(self) -> Finish:
        """The run, to its end; a Ctrl-C (KeyboardInterrupt) is left to the caller."""
        self.ledger.start()
        try:
            self.setup()
            finish = self.rounds()
            self.confirm()
            return finish
        except ProviderError as err:
            return self.stopped_on(err, PROVIDER_ERROR)
        except (ProblemError, FileNotFoundError) as err:
            return self.stopped_on(err, BAD_INPUT)
        except ExecutorError as err:      # the engine, not the problem or the candidate
            return self.stopped_on(err, ENGINE_ERROR)
        except Exception as err:  # a bug must end the session visibly, not hang a notebook
            error = f"{type(err).__name__}: {err}"
            path = self.state.folder / "error.txt"
            artifacts.write_text(path, traceback.format_exc())
            self.emit("notice", 0, text=f"kforge stopped on an internal error: {error} "
                      f"(traceback in {path})")
            return on_error(INTERNAL_ERROR, error)

    def stopped_on(self, err: Exception, kind: str) -> Finish:
        """The run ends on an error the person can act on, said as a notice."""
        self.emit("notice", 0, text=str(err))
        return on_error(kind, str(err))

    def stop_asked(self) -> bool:
        return self.stop.is_set()

    @property
    def budget(self) -> Budget:
        return self.ledger.budget

    def setup(self) -> None:
        s, spec, state = self.session, self.spec, self.state
        config = agents_for(spec, state)
        state.generator, state.analyst, state.provider_description, notices = \
            make_agents(config)
        refuse_an_unworkable_target(state.generator, spec.target, self.executor, notices)
        for notice in notices:
            self.emit("notice", 0, text=notice)
        if "compile" in state.options.baselines:
            compiled = long_name(state.options.compile_mode)
            self.emit("notice", 0, text=f"every evaluation times the reference eager and "
                      f"with {compiled} beside the candidate; the first also warms "
                      "torch.compile up, at most once a run (~10-40 s on a small, busy CPU)")
        self.emit("started", state.next_iteration, problem=spec.problem.name,
                  target=spec.target.name, device=feasible.where_it_runs(spec.target),
                  provider=state.provider_description, model=config.model,
                  analysis_model=config.analysis_model, iterations=self.budget.iterations,
                  samples=self.budget.samples, search=self.search.name,
                  width=self.search.width, mode=spec.mode, artifacts=str(state.folder),
                  timing_note=spec.target.timing_note(), resumed_at=state.next_iteration)
        for note in state.resume_notes:
            self.emit("notice", state.next_iteration, text=note)
        state.status = "running"
        s.save_state()

    # --- rounds -------------------------------------------------------------------------------
    def rounds(self) -> Finish:
        """The functional pass, then optimisation rounds, until one says the run ends."""
        s = self.session
        for iteration in range(self.state.next_iteration, self.budget.iterations):
            finish = self.must_end()
            if finish:
                return finish
            finish = self.functional(iteration) if s.best is None else self.optimise(iteration)
            if finish:
                return finish
            self.iteration_done(iteration)
            if self.budget.iterations == 1 or self.stop_asked():
                break
        return STOPPED_BY_USER if self.stop_asked() else ITERATIONS_USED

    def must_end(self) -> Finish | None:
        """Before a round: a Stop, or a budget used up (the target speedup reached)."""
        if self.stop_asked():
            return STOPPED_BY_USER
        return out_of_budget(self.ledger, self.session.best)

    def functional(self, iteration: int) -> Finish | None:
        """A round of the functional pass; how the run ends, if it does."""
        plans = functional_plans(self.session.history, self.search.width)
        self.emit("iteration_started", iteration, phase="functional", kind=plans[0].kind)
        if not self.round(iteration, plans, functional=True):
            return self.too_small()
        self.settle(iteration)
        finish = same_failure_again(self.session.history, iteration)
        if finish:
            self.iteration_done(iteration)
        return finish

    def optimise(self, iteration: int) -> Finish | None:
        """A round of the optimisation pass; how the run ends, if it does."""
        s, state = self.session, self.state
        best_before = s.best
        branches = self.search.branches(s.tree(), s.rank, iteration)
        if not branches:
            return self.nothing_to_expand()
        plans = self.plans(branches, iteration)
        if self.ending:                     # stopped, or the budget ran out
            return self.ending
        if not plans and not self.search.branches(s.tree(), s.rank, iteration):
            return self.nothing_to_expand()
        if not plans:
            return None
        self.emit("iteration_started", iteration, phase="optimisation", kind="optimise",
                  parents=[p.base.id if p.base else None for p in plans])
        if not self.round(iteration, plans):
            return self.too_small()
        self.settle(iteration)
        state.stale_rounds = 0 if s.best is not best_before else state.stale_rounds + 1
        if self.budget.patience and state.stale_rounds >= self.budget.patience:
            self.iteration_done(iteration)
            return Finish(PATIENCE, f"{state.stale_rounds} rounds without improvement")
        return None

    def too_small(self) -> Finish:
        """The end where the budget would not cover the calls a round needs."""
        return Finish(BUDGET, self.ledger.too_small())

    def iteration_done(self, iteration: int) -> None:
        self.state.next_iteration = max(self.state.next_iteration, iteration + 1)
        self.session.save_state()

    def nothing_to_expand(self) -> Finish:
        """Why the search has no branch left."""
        s, last = self.session, self.state.last_recommendation
        if last is not None and last.action.get("kind") == "done" and s.finished_branches:
            agreed = "; you agreed" if self.agreed else ""
            return Finish(NOTHING_TO_TRY, "the analyst has nothing further to recommend "
                          f"({unnested(last.title)}){agreed}")
        if s.pruned:
            return Finish(NOTHING_TO_TRY, "every branch is pruned or finished: nothing left "
                          "to expand")
        return Finish(NOTHING_TO_TRY, "nothing left to expand")

    # --- plans --------------------------------------------------------------------------------
    def plans(self, branches: list[Branch], iteration: int) -> list[Plan]:
        """The round's plans, one per branch not skipped; stops asking once the run must end
        (`ending` set)."""
        plans: list[Plan] = []
        # asked in the order of the parents' ids, not of their ranks: a replay on another
        # machine (other timings) asks in the same order, with the same "being tried
        # elsewhere" in each prompt
        branches.sort(key=lambda b: (b.parent is None, b.parent and
                                     (b.parent.iteration, b.parent.sample)))
        for slot, branch in enumerate(branches):
            plan = self.plan(branch, iteration, slot,
                             [p.recommendation.title for p in plans if p.recommendation])
            if self.ending:
                return plans
            if plan is not None:
                plans.append(plan)
        return plans

    def plan(self, branch: Branch, iteration: int, slot: int,
             elsewhere: list[str]) -> Plan | None:
        """Analyse a branch's parent and decide on the recommendation (the policy: you, in
        review mode); None where the branch is skipped or finished. Sets `ending` where the
        whole search must end (a stop, a budget)."""
        s, parent = self.session, branch.parent
        if parent is None:
            return Plan("initial", None)
        if not self.ledger.reserve():           # the analyst's call counts against budgets too
            self.ending = self.too_small()
            return None
        try:
            recommendation = self.recommend(parent, iteration, slot, elsewhere)
        finally:
            self.ledger.release()
        done = recommendation.action.get("kind") == "done"
        if done and self.spec.mode != "review":
            s.finished_branches.add(parent.id)
            return None
        # In review mode a person answers every recommendation, "done" included: accepting
        # it ends the branch, a redirect or an edit goes on with their words.
        decision = self.policy.decide(recommendation)
        self.emit("decision", iteration, kind=decision.kind, text=decision.text,
                  parent=parent.id)
        self.journal.save_json(iteration, slot_file("decision.json", slot),
                               {"kind": decision.kind, "text": decision.text,
                                "parent": parent.id})
        if decision.kind == STOP or self.stop_asked():
            self.ending = STOPPED_BY_USER
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
        spec = self.spec
        request = AnalysisRequest(spec.problem, spec.target.name, best.code, best.result,
                                  profile_summary(best.result),
                                  self.search.tried(self.session.tree(), best),
                                  iteration, deadline=self.ledger.deadline(),
                                  objective=measures.objective_text(best.result,
                                                                    spec.options.objective),
                                  alternatives=max(0, self.budget.samples - 1),
                                  elsewhere=list(dict.fromkeys(elsewhere)),
                                  candidate=best.id, outcomes=self.outcomes(iteration))
        recommendation = self.state.analyst.analyse(request)
        self.state.last_recommendation = recommendation
        self.ledger.add(recommendation.usage)
        self.emit("recommendation", iteration, title=recommendation.title,
                  text=recommendation.text, expected_gain=recommendation.expected_gain,
                  usage=vars(recommendation.usage), parent=best.id)
        self.journal.save_recommendation(iteration, slot, best.id, recommendation,
                                         request.summary)
        return recommendation

    def outcomes(self, iteration: int) -> list[Outcome]:
        """The earlier rounds' attempts and what came of them, for an agent's prompt."""
        s = self.session
        return outcomes_of(list(s.history),
                           lambda shown: Standing(self.state.options, s.standing.duels,
                                                  s.standing.dropped).of(shown)[0],
                           iteration)

    # --- a round's samples --------------------------------------------------------------------
    def round(self, iteration: int, plans: list[Plan], functional: bool = False) -> int:
        """Ask for each plan's samples and judge them, all concurrently; how many could be
        asked for."""
        todo = jobs(plans, max(1, self.budget.samples), self.session.history, functional)

        def one(job: Job) -> bool:
            if not self.ledger.reserve():
                self.emit("notice", iteration, text=f"sample {job.sample} not asked for: the "
                          "token or cost budget would not cover it")
                return False
            try:
                self.generate(iteration, job)
            finally:
                self.ledger.release()
            return True

        first = 0 if self.ledger.sized else 1     # a first call alone: its size is the
        asked = [one(job) for job in todo[:first]]      # estimate the others reserve
        if len(todo) > first:
            with ThreadPoolExecutor(len(todo) - first) as pool:
                asked += pool.map(in_this_context(one), todo[first:])
        return sum(asked)

    def generate(self, iteration: int, job: Job) -> None:
        """Ask for one sample and judge it."""
        s, spec, plan, base = self.session, self.spec, job.plan, job.plan.base
        samples = max(1, self.budget.samples)
        said, applied = plan.variation(job.rank)
        request = GenerationRequest(
            problem=spec.problem, target=spec.target.name, kind=plan.kind,
            iteration=iteration, previous_code=base.code if base else None,
            previous_result=base.result if base else None, instruction=plan.instruction,
            action=plan.accepted_action(),
            aux=[(name, text) for name, text, only in s.aux
                 if only is None or iteration in only],
            translate_from=spec.translate_from, sample=job.sample, variant=job.variant,
            precision=spec.precision, deadline=self.ledger.deadline(), variation=said,
            temperature=sample_temperature(spec.agents.temperatures, job.rank, samples),
            parent=base.id if base is not None and base.code else None,
            outcomes=self.outcomes(iteration))
        generation = self.state.generator.generate(request)
        self.ledger.add(generation.usage)
        parent = base.id if base is not None and base.code else None
        self.emit("candidate_generated", iteration, sample=job.sample, code=generation.code,
                  failure=generation.failure, usage=vars(generation.usage),
                  notes=generation.notes, knowledge=generation.knowledge,
                  variation=generation.variation, temperature=generation.temperature,
                  parent=parent)
        self.journal.save_generation(iteration, job.sample, generation)
        lineage = dict(parent=parent, applied=applied)
        if generation.code is None:
            result = Result(GENERATION_FAILURE, generation.failure or "no code")
            s.record(Attempt(iteration, job.sample, plan.kind, None, result, generation,
                             plan.recommendation, plan.decision, **lineage))
        else:
            s.judge_and_record(generation.code, iteration, job.sample, generation, plan.kind,
                               plan.recommendation, plan.decision, **lineage)

    # --- deciding duels -----------------------------------------------------------------------
    def time_for_more(self) -> bool:
        """Neither stopped nor out of wall time: a duel (seconds of timing) may start."""
        wall_s = self.budget.wall_s
        return not self.stop_asked() and not (wall_s and self.ledger.elapsed() > wall_s)

    def settle(self, iteration: int) -> None:
        """After a round: where a candidate stands above or level with the best only by an
        indirect comparison (samples timed beside the same earlier best, or judgings without a
        rival), the two are timed side by side (confirm.py) before it counts."""
        s = self.session
        tried: set[tuple[str, str]] = set()
        while self.time_for_more():
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
        s = self.session
        folder = self.state.folder / "duels" / f"{attempt.id}-vs-{rival.id}"
        options = dataclasses.replace(s.rival_options(s.options_for(attempt.generation), rival),
                                      ncu=False)
        return self.executor.evaluate(self.spec.problem, attempt.code, self.spec.target,
                                      options, folder)

    def record_duel(self, duel: confirm.Duel, iteration: int) -> None:
        s = self.session
        s.add_duel(duel)
        self.emit("duel", iteration, **duel.to_dict(), best=s.best.id if s.best else None,
                  text=confirm.duel_text(duel.to_dict()))
        s.save_state()

    # --- the final judging --------------------------------------------------------------------
    def confirm(self) -> None:
        """The final judging (confirm.py): the best few each timed again beside the best."""
        s = self.session
        if self.stop_asked() or s.confirm_count < 2:
            return
        before = s.best
        if before is None or s.rank(before)[0] == 0:      # ranked by an --objective
            return
        chosen = confirm.finalists(list(s.history), s.rank, s.confirm_count)
        if len(chosen) < 2:
            return
        iteration = s.history[-1].iteration
        self.emit("confirming", iteration, finalists=[a.id for a in chosen],
                  rounds=confirm.ROUNDS)
        judged, fought = [], set()
        while self.time_for_more():
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
        s.save_state()


def unnested(title: str) -> str:
    """A title said inside parentheses, its own parentheses made commas: "no further change
    expected (round 4)" -> "no further change expected, round 4"."""
    return re.sub(r"\s*\(([^()]*)\)", r", \1", title)


def in_this_context(fn):
    """`fn`, run on a pool's thread in a copy of the caller's context (the retry listener of
    providers/retry.py goes with it)."""
    context = contextvars.copy_context()
    return lambda *args: context.copy().run(fn, *args)


def refuse_an_unworkable_target(generator, target, executor, notices: list[str]) -> None:
    """Before any iteration: a target the agent cannot write, or whose candidates could be
    neither run nor compiled here, ends the run with the reason (feasible.py)."""
    why = feasible.refusal(feasible.written_targets(generator), target, executor)
    if why:
        raise feasible.TargetError(" ".join([why, *notices]))
