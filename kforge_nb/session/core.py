"""The loop behind `%%kforge` and `kforge run`: generate, evaluate, analyse, decide, repeat.

    functional pass:   generate -> evaluate -> (fix with the verdict's feedback) ... until correct
    optimisation pass: analyse the best candidate -> ONE recommendation -> decision (policy) ->
                       generate with it -> evaluate -> keep the fastest correct candidate

Each round asks for `samples` candidates, evaluated concurrently (timings are serialised by the
evaluator). Budgets: iterations, wall time, tokens, cost, a target speedup, and K rounds without
improvement. The session emits events and never draws anything; UIs subscribe.
"""
from __future__ import annotations

import json
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from .. import artifacts
from ..agents import AgentConfig, make_agents
from ..agents.base import AnalysisRequest, Generation, GenerationRequest, Recommendation, Usage
from ..agents.feedback import profile_summary
from ..evaluator import EvalOptions, evaluate
from ..problem import Problem, ProblemError
from ..providers import ProviderError
from ..result import CORRECT, GENERATION_FAILURE, Result
from ..targets import get_target
from .decisions import ACCEPT, EDIT, REDIRECT, SKIP, STOP, AutoPolicy, Decision, QueuePolicy
from .events import Event
from .inputs import load_translation, parse_aux
from .records import Attempt, Budget


class Session:
    """One kernel-engineering session on one problem and one target."""

    def __init__(self, problem: Problem, target: str = "auto", agents: AgentConfig | None = None,
                 budget: Budget | None = None, options: EvalOptions | None = None,
                 mode: str = "auto", aux: list[str] | None = None,
                 translate_from: str | None = None, out: str | Path = "kforge-runs",
                 policy=None):
        if mode not in ("auto", "review"):
            raise ValueError(f"mode must be 'auto' or 'review', not {mode!r}")
        self.problem, self.target = problem, get_target(target)
        self.agents_config = agents or AgentConfig()
        self.budget = budget or Budget()
        self.options = options or EvalOptions()
        self.mode = mode
        self.policy = policy or (QueuePolicy() if mode == "review" else AutoPolicy())
        self.aux = [parse_aux(spec) for spec in (aux or [])]
        self.translate_from = load_translation(translate_from)
        self.folder = artifacts.new_folder(out, f"{problem.name}-{self.target.name}")
        self.options.out_dir = self.folder
        self.history: list[Attempt] = []
        self.events: list[Event] = []
        self.usage = Usage()
        self._usage_lock = threading.Lock()
        self._in_flight = 0                  # generation calls under way (budget reservations)
        self._largest_call = Usage()         # the largest single call so far, as an estimate
        self._subscribers: list[Callable[[Event], None]] = []
        self._stop = threading.Event()
        self._done = threading.Event()
        self._closing = False        # set before `finished` is emitted: views see the end
        self._thread: threading.Thread | None = None
        self._started = 0.0
        self.finish_reason = ""
        self.error: str | None = None
        self.generator = self.analyst = None
        self.provider_description = ""

    # --- public API ---------------------------------------------------------------------------
    def subscribe(self, callback: Callable[[Event], None]) -> None:
        self._subscribers.append(callback)

    @property
    def best(self) -> Attempt | None:
        correct = [a for a in self.history if a.result.state == CORRECT]
        return min(correct, key=lambda a: a.speed) if correct else None

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

    def evaluate_code(self, code: str, label: str = "manual") -> Attempt:
        """Judge a hand-written or hand-edited candidate and add it to the history."""
        iteration = (self.history[-1].iteration + 1) if self.history else 0
        return self._evaluate(code, iteration, 0, None, label)

    def export(self, path: str | Path, attempt: Attempt | None = None) -> Path:
        """Write the best (or the given) candidate as a standalone .py; see kforge_nb/export.py."""
        from ..export import export
        return export(self, path, attempt)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        """`_kforge` alone in a notebook cell shows the run report (see kforge_nb/ui/report.py)."""
        from ..ui.report import bundle, run_record
        return bundle(run_record(self))

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
            "timing_real": t.real if t else None,
            "iterations": len({a.iteration for a in self.history}),
            "candidates": len(self.history),
            "input_tokens": self.usage.input_tokens, "output_tokens": self.usage.output_tokens,
            "cost_usd": round(self.usage.cost_usd, 4),
            "unpriced_calls": self.usage.unpriced_calls,
            "elapsed_s": round(time.monotonic() - self._started, 2) if self._started else 0,
            "artifacts": str(self.folder), "error": self.error,
        }

    # --- the loop -----------------------------------------------------------------------------
    def run(self) -> Attempt | None:
        self._started = time.monotonic()
        try:
            self._setup()
            self._loop()
        except ProviderError as err:
            self.error = str(err)
            self.finish_reason = f"provider error: {err}"
            self._emit("notice", 0, text=str(err))
        except (ProblemError, FileNotFoundError) as err:
            self.error = str(err)
            self.finish_reason = f"bad input: {err}"
            self._emit("notice", 0, text=str(err))
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
        self._emit("started", 0, problem=self.problem.name, target=self.target.name,
                   device=self.target.device() if available.runs else available.reason,
                   provider=self.provider_description, model=config.model,
                   analysis_model=config.analysis_model, iterations=self.budget.iterations,
                   samples=self.budget.samples, mode=self.mode, artifacts=str(self.folder),
                   timing_note=self.target.timing_note())

    def _loop(self) -> None:
        stale_rounds = 0
        for iteration in range(self.budget.iterations):
            reason = self._over_budget()
            if reason:
                self.finish_reason = reason
                return
            best_before = self.best
            if best_before is None:
                last = self.history[-1] if self.history else None
                kind = "fix" if last and last.code else "initial"
                self._emit("iteration_started", iteration, phase="functional", kind=kind)
                self._round(iteration, kind, last, None, None)
            else:
                recommendation = self._recommend(best_before, iteration)
                done = recommendation.action.get("kind") == "done"
                if done and self.mode != "review":
                    self.finish_reason = f"the analyst has nothing further to recommend " \
                                         f"({recommendation.title})"
                    return
                # In review mode a person answers every recommendation, "done" included:
                # accepting it ends the run, a redirect or an edit goes on with their words.
                decision = self.policy.decide(recommendation)
                self._emit("decision", iteration, kind=decision.kind, text=decision.text)
                self._save_json(iteration, "decision.json", {"kind": decision.kind,
                                                             "text": decision.text})
                if decision.kind == STOP or self._stop.is_set():
                    self.finish_reason = "stopped by the user"
                    return
                if done and decision.kind in (ACCEPT, SKIP):
                    self.finish_reason = f"the analyst has nothing further to recommend " \
                                         f"({recommendation.title}); you agreed"
                    return
                if decision.kind == SKIP:
                    continue
                instruction = {ACCEPT: recommendation.text, EDIT: decision.text,
                               REDIRECT: decision.text}[decision.kind]
                self._emit("iteration_started", iteration, phase="optimisation", kind="optimise")
                self._round(iteration, "optimise", best_before, recommendation, decision,
                            instruction)
                improved = self.best is not best_before
                stale_rounds = 0 if improved else stale_rounds + 1
                if self.budget.patience and stale_rounds >= self.budget.patience:
                    self.finish_reason = f"{stale_rounds} rounds without improvement"
                    return
            if self.budget.iterations == 1 or self._stop.is_set():
                break
        self.finish_reason = self.finish_reason or (
            "stopped by the user" if self._stop.is_set() else "iteration budget used")

    def _round(self, iteration: int, kind: str, base: Attempt | None,
               recommendation: Recommendation | None, decision: Decision | None,
               instruction: str | None = None) -> None:
        def one(sample: int) -> None:
            if not self._reserve():
                self._emit("notice", iteration, text=f"sample {sample} not asked for: the "
                           "token or cost budget would not cover it")
                return
            try:
                generate(sample)
            finally:
                with self._usage_lock:
                    self._in_flight -= 1

        def generate(sample: int) -> None:
            request = GenerationRequest(
                problem=self.problem, target=self.target.name, kind=kind, iteration=iteration,
                previous_code=base.code if base else None,
                previous_result=base.result if base else None, instruction=instruction,
                aux=[(name, text) for name, text, only in self.aux
                     if only is None or iteration in only],
                translate_from=self.translate_from, sample=sample,
                precision=self.options.precision)
            generation = self.generator.generate(request)
            with self._usage_lock:          # samples of one round finish on several threads
                self.usage = self.usage + generation.usage
                self._largest_call = max(self._largest_call, generation.usage,
                                         key=lambda u: (u.input_tokens + u.output_tokens,
                                                        u.cost_usd))
            self._emit("candidate_generated", iteration, sample=sample, code=generation.code,
                       failure=generation.failure, usage=vars(generation.usage),
                       notes=generation.notes)
            self._save_generation(iteration, sample, generation)
            if generation.code is None:
                result = Result(GENERATION_FAILURE, generation.failure or "no code")
                self._record(Attempt(iteration, sample, kind, None, result, generation,
                                     recommendation, decision))
            else:
                self._evaluate(generation.code, iteration, sample, generation, kind,
                               recommendation, decision)
        samples = max(1, self.budget.samples)
        first = 0 if self._largest_call.calls else 1   # a first call alone: its size is the
        for sample in range(first):                    # estimate the others reserve
            one(sample)
        if samples > first:
            with ThreadPoolExecutor(samples - first) as pool:
                list(pool.map(one, range(first, samples)))

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

    def _evaluate(self, code: str, iteration: int, sample: int, generation: Generation | None,
                  kind: str, recommendation=None, decision=None) -> Attempt:
        options = self.options
        if generation is not None and generation.kept_ops:
            options = _with_allowed(options, generation.kept_ops)
        folder = self.folder / f"iter-{iteration:02d}" / f"sample-{sample}"
        result = evaluate(self.problem, code, self.target, options, folder=folder)
        attempt = Attempt(iteration, sample, kind, code, result, generation, recommendation,
                          decision)
        self._record(attempt)
        return attempt

    def _record(self, attempt: Attempt) -> None:
        self.history.append(attempt)
        self._emit("evaluated", attempt.iteration, sample=attempt.sample, code=attempt.code,
                   result=attempt.result.to_dict(), best=self.best is attempt, kind=attempt.kind)
        self._emit("usage", attempt.iteration, **self._usage_dict())

    def _recommend(self, best: Attempt, iteration: int) -> Recommendation:
        history = [a.recommendation.title for a in self.history if a.recommendation]
        request = AnalysisRequest(self.problem, self.target.name, best.code, best.result,
                                  profile_summary(best.result), history, iteration)
        recommendation = self.analyst.analyse(request)
        self.usage = self.usage + recommendation.usage
        self._emit("recommendation", iteration, title=recommendation.title,
                   text=recommendation.text, expected_gain=recommendation.expected_gain,
                   usage=vars(recommendation.usage))
        self._save_json(iteration, "recommendation.json", {
            "title": recommendation.title, "text": recommendation.text,
            "expected_gain": recommendation.expected_gain, "action": recommendation.action,
            "summary": request.summary, "messages": recommendation.messages,
            "response": recommendation.response})
        return recommendation

    def _over_budget(self) -> str | None:
        if self._stop.is_set():
            return "stopped by the user"
        return self.budget.exhausted(self.usage, time.monotonic() - self._started, self.best)

    def _finish(self) -> None:
        best = self.best
        self._closing = True
        self._emit("finished", self.history[-1].iteration if self.history else 0,
                   reason=self.finish_reason,
                   best={"iteration": best.iteration, "sample": best.sample, "code": best.code,
                         "result": best.result.to_dict()} if best else None,
                   iterations=len({a.iteration for a in self.history}),
                   usage=self._usage_dict(), artifacts=str(self.folder))
        if best:
            artifacts.write_text(self.folder / "best_candidate.py", best.code)
        artifacts.write_json(self.folder / "run.json", {
            "summary": self.summary(), "history": [a.to_dict() for a in self.history]})
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
                "elapsed_s": round(time.monotonic() - self._started, 2)}

    _emit_lock = threading.Lock()

    def _emit(self, event_kind: str, iteration: int, **data) -> None:
        event = Event(event_kind, iteration, data)
        with self._emit_lock:
            self.events.append(event)
            with open(self.folder / "events.jsonl", "a") as f:
                f.write(json.dumps(event.to_dict(), default=str) + "\n")
        for callback in list(self._subscribers):
            try:
                callback(event)
            except Exception:  # a broken view must not stop the session
                traceback.print_exc()

    def _save_generation(self, iteration: int, sample: int, generation: Generation) -> None:
        folder = self.folder / f"iter-{iteration:02d}" / f"sample-{sample}"
        artifacts.write_json(folder / "prompt.json", generation.messages)
        artifacts.write_text(folder / "response.md", generation.response or "")
        artifacts.write_json(folder / "generation.json", {
            "failure": generation.failure, "usage": vars(generation.usage),
            "notes": generation.notes, "kept_ops": generation.kept_ops})

    def _save_json(self, iteration: int, name: str, data: dict) -> None:
        artifacts.write_json(self.folder / f"iter-{iteration:02d}" / name, data)


def _with_allowed(options: EvalOptions, ops: list[str]) -> EvalOptions:
    import dataclasses
    rails = dataclasses.replace(options.guardrails,
                                allow=[*options.guardrails.allow, *ops])
    return dataclasses.replace(options, guardrails=rails)
