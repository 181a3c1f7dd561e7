"""The evaluation protocol, top to bottom: (problem, candidate, target) -> Result.

 1. Static checks in this process: the candidate parses; guardrails (target requirements,
    default bans, the user's rules). No candidate code runs here, ever.
 2. Availability: a target that cannot run on this host gives `unavailable` (after compiling
    the candidate where the compiler is present, so compile errors are still reported).
 3. Two workers: the judge (the reference; it never sees candidate code) and the candidate
    (sandboxed: no credentials, no network, read-only outside its folder). The judge checks the
    problem fits before allocating anything; the candidate is built meanwhile.
 4. Trials, one at a time: the judge draws the inputs from the trial's seed and computes the
    reference; the candidate draws the same inputs, runs under the audit of what it dispatched
    and launched, and streams its outputs to the judge, which compares them on the device.
    Compute with torch ops -> `rejected` (op and line named); no kernel of its own -> `rejected`.
 5. Timing (correct candidates only): reference, torch.compile (compiled once by the judge)
    and candidate timed in alternating blocks over rotating input sets, round after round until
    the 95 % interval of the speedup is within ±5 % or a time cap (stats.py); each speedup is
    the median of paired ratios with its interval; a timed call's output is checked again; a
    speedup over 10x is timed twice; on the CPU, competition for it is read meanwhile (busy).
    Under --precision tf32/bf16/fp16 the reference as run under that policy (policy.py) is a
    side of each round too. Profiles (the median of several calls), roofline.
 6. Your own measurement (--measure): the hook runs on the reference in the judge and on the
    candidate in its worker, on inputs drawn from one seed; its failures are reported in
    `measures`, never in the verdict.
 7. Anything the candidate patched is named and the verdict becomes `rejected`.
 8. Artifacts: candidate, result.json, logs and traces in one folder.
"""
from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import math
import os
import random
import re
import shutil
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .. import artifacts, devices, measures
from ..problem import (NULL_BYTE, Problem, ProblemError, decode_source,
                       null_byte_line)
from ..result import (COMPILE_FAILURE, CORRECT, MISMATCH, REJECTED, RUNTIME_ERROR, UNAVAILABLE,
                      Correctness, Result, Timing)
from ..runtime.native import cache_dir
from ..targets import Target, get_target
from ..guardrails import Guardrails
from . import clocks, nsight, replies, sandbox, transfer, stats
from .device_lock import cpu_work, timing_lock
from .process import Worker, WorkerFailure, available_memory, default_memory_limit, descendants
from .wire import ProtocolError
from ..pyparse import parse_ast

SUSPICIOUS_SPEEDUP = 10.0
# a time this many times below the roofline's speed of light is not a measurement (the CPU's
# ceilings are probes and honest kernels have reached 1.8x them; a forged clock reaches 100x)
PHYSICS_LIMIT = 4.0
HOOK_SEED = 2000         # the hook's inputs: a draw of their own (trials: 0.., timing: 1000..)
NSIGHT_SEED = 3000       # the inputs of the call Nsight Compute profiles
NSIGHT_TIMEOUT_S = 150.0
# the interleaved rounds go on until the interval is narrow, for at most this many times the
# timing budget, and never more than TIMING_CAP_S (the fewest rounds always run)
TIMING_CAP_FACTOR = 4.0
TIMING_CAP_S = 120.0
PROFILE_GAP = 2.0        # a profiled call this many times off the timed median is said
LARGE_TRIAL_BYTES = 1 << 30     # inputs and outputs of a trial beyond this: fewer trials
SLOW_CALL_MS = 100.0            # calls this slow are timed one a block


@dataclass
class EvalOptions:
    trials: int = 5
    timeout_s: float = 180.0
    memory_bytes: int = field(default_factory=default_memory_limit)
    precision: str = "strict"
    guardrails: Guardrails = field(default_factory=Guardrails)
    baselines: tuple[str, ...] = ("eager", "compile")
    measure: bool = True            # time and profile correct candidates
    shape_check: bool = True        # one extra trial at another batch size
    seed: int = 0
    out_dir: str | Path = "kforge-runs"
    timing_budget_s: float = 1.0    # for the interleaved timing rounds, both sides together
    timing_rounds: int = 6          # the fewest interleaved rounds (more until the interval
    #                                 of the speedup is within ±5 %, or the time cap)
    sandbox: bool = True            # --no-sandbox turns it off (and every verdict says so)
    # Nsight Compute's counters of a correct candidate, where ncu can profile (nsight.py). They
    # cost ~13 s a candidate on an H100 and only an analyst reads them, so a session asks for
    # them, and only for a candidate at least `ncu_over` times faster than eager (its parent's
    # speedup: the analyst reads a lineage's best)
    ncu: bool = False
    ncu_over: float | None = None
    # --measure FILE.py: the hook's source (read in the parent, run only in the workers) and
    # its file; --objective NAME[:min|max], which the session ranks by (kforge_nb/measures.py)
    measure_hook: str = ""
    measure_label: str = ""
    objective: str = ""

    def trial_plan(self, secret: int = 0) -> list[dict]:
        """The trials' inputs: seeds offset by `secret`, a number drawn for each evaluation that
        the candidate cannot predict (answers computed ahead for seeds 0..5 were served once)."""
        distributions = ["given", "given", "scaled", "uniform"]
        plan = [{"seed": self.seed + secret + i, "trial": i + 1,
                 "distribution": distributions[i % 4] if i < 4 else "given"}
                for i in range(max(1, self.trials))]
        if self.shape_check:
            plan.append({"seed": self.seed + secret + len(plan), "trial": len(plan) + 1,
                         "distribution": "given", "batch": "auto"})
        return plan

    def timing_sets(self, input_bytes: int, secret: int = 0) -> list[dict]:
        """Input sets the timed calls rotate over: three, fewer when inputs are large (each set
        is held twice on each side: its pristine values and the refreshed copy)."""
        count = 3 if input_bytes <= 256 << 20 else 2 if input_bytes <= 1 << 30 else 1
        return [{"seed": self.seed + secret + 1000 + j, "distribution": "given"}
                for j in range(count)]


def evaluate(problem: Problem, candidate: str | bytes, target: str | Target = "auto",
             options: EvalOptions | None = None, folder: str | Path | None = None,
             progress: Callable[[str], None] | None = None) -> Result:
    """Judge one candidate. See the module docstring for the protocol. `candidate` is its
    source, or a file's bytes (decoded as Python decodes a file: a file that is not text is a
    `compile_failure` naming the first bad byte, and is kept as it was). `progress` is told
    each step as it ends, with the seconds it took (a large problem's judging takes minutes)."""
    options = options or EvalOptions()
    target = get_target(target) if isinstance(target, str) else target
    folder = (Path(folder) if folder else artifacts.new_folder(
        options.out_dir, f"{problem.name}-{target.name}")).resolve()   # workers chdir
    started = time.monotonic()
    undecodable = ""
    if isinstance(candidate, (bytes, bytearray)):
        artifacts.write_bytes(folder / "candidate.py", bytes(candidate))   # kept as given
        try:
            candidate = decode_source(bytes(candidate), "candidate.py")
        except ValueError as err:
            undecodable = str(err)
    else:
        artifacts.write_text(folder / "candidate.py", candidate)
    artifacts.write_text(folder / "reference.py", problem.source)
    result = Result(COMPILE_FAILURE, undecodable, error={"type": "UnicodeDecodeError",
                                                         "text": undecodable}) \
        if undecodable else judge(problem, candidate, target, options, folder, progress)
    result.target, result.artifacts = target.name, str(folder)
    result.elapsed_s = round(time.monotonic() - started, 3)
    artifacts.write_json(folder / "result.json", result.to_dict())
    return result


def judge(problem: Problem, candidate: str, target: Target, options: EvalOptions,
          folder: Path, progress: Callable[[str], None] | None = None) -> Result:
    # 1. static checks
    if not candidate.strip():
        return Result(REJECTED, "candidate.py is empty: there is no `class ModelNew(nn.Module)` "
                      "to judge (rule `defines-modelnew`)", rules=["defines-modelnew"])
    line = null_byte_line(candidate)
    if line:
        return Result(COMPILE_FAILURE, f"candidate.py line {line}: {NULL_BYTE}",
                      error={"type": "SyntaxError", "text": NULL_BYTE, "line": line})
    try:
        tree = parse_ast(candidate, filename=str(folder / "candidate.py"))
    except SyntaxError as err:
        where = f" line {err.lineno}" if err.lineno else ""
        return Result(COMPILE_FAILURE, f"candidate.py{where}: {err.msg}",
                      error={"type": "SyntaxError", "text": err.msg, "line": err.lineno,
                             "source_line": (err.text or "").rstrip()})
    fired = options.guardrails.check(candidate, tree, target.required, problem.source)
    if fired:
        lines = [f"{rule.name}: {rule.reason} ({'; '.join(where[:3])})" for rule, where in fired]
        return Result(REJECTED, "guardrail fired: " + " | ".join(lines),
                      rules=[rule.name for rule, _ in fired])

    # 2. availability
    available = target.availability()
    if not available.runs:
        if available.compiles:
            failed = compile_only(problem, candidate, target, options, folder)
            if failed is not None:
                return failed
        return Result(UNAVAILABLE, available.reason)

    # 3-6. the workers
    return Evaluation(problem, candidate, target, options, folder, progress).run()


def candidate_job(problem: Problem, candidate: str, target: Target, options: EvalOptions,
                  folder: Path, device: str, compile_only: bool) -> dict:
    allowed = list(options.guardrails.allow)
    return {"source": candidate, "filename": str(folder / "candidate.py"), "target": target.name,
            "problem_source": problem.source, "problem_label": problem.label,
            "device": device, "compile_only": compile_only, "init_seed": options.seed,
            "precision": options.precision, "allowed_ops": allowed,
            "env": target.worker_env(), "log": str(folder / "worker.log"),
            "sandbox": sandbox.plan(folder, options.sandbox, candidate, options.memory_bytes,
                                    data_files(problem.source))}


def data_files(source: str) -> list[str]:
    """Files the problem's source names by absolute path (a notebook's inputs saved by
    `%%kforge --inputs`): the candidate's worker draws inputs with the problem's code, so its
    sandbox shows them, read-only."""
    try:
        tree = parse_ast(source)
    except SyntaxError:
        return []
    return sorted({n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and
                   isinstance(n.value, str) and n.value.startswith("/") and
                   len(n.value) < 4096 and "\n" not in n.value and os.path.isfile(n.value)})


def compile_only(problem: Problem, candidate: str, target: Target, options: EvalOptions,
                 folder: Path) -> Result | None:
    """Build the candidate where it cannot run: a compile error is still reported."""
    job = candidate_job(problem, candidate, target, options, folder, "cpu", True)
    worker = Worker("candidate_main", job, options.timeout_s, options.memory_bytes)
    try:
        sandbox_report(worker)
        message = worker.recv()
        return failure_result(message, target) if "failed" in message else None
    except WorkerFailure as failure:
        return runtime_failure(failure)
    finally:
        worker.close()


def sandbox_report(worker: Worker) -> dict:
    """The worker's first frame: what its sandbox holds, sent before the candidate's code ran."""
    report = worker.recv().get("sandbox")
    if not isinstance(report, dict):
        worker.kill()
        raise WorkerFailure("protocol", "protocol violation: the worker's first frame is not "
                            "its sandbox report")
    return report


def runtime_failure(failure: WorkerFailure) -> Result:
    tail = failure.log_tail.strip()
    text = f"{failure} (see worker.log)" + (f"; its log ends:\n{tail[-800:]}" if tail and
                                           tail not in ("(empty)", "(no log)") else "")
    return Result(RUNTIME_ERROR, text, error={"type": failure.kind, "text": str(failure),
                                              "log_tail": tail})


class CandidateFailed(Exception):
    """The candidate failed after its trials (while timed or profiled): its verdict."""

    def __init__(self, result: Result):
        super().__init__(result.message)
        self.result = result


class Evaluation:
    """One candidate against one problem: the parent's side of both workers' protocol."""

    def __init__(self, problem: Problem, candidate: str, target: Target, options: EvalOptions,
                 folder: Path, progress: Callable[[str], None] | None = None):
        self.problem, self.candidate, self.target = problem, candidate, target
        self.options, self.folder = options, folder
        self.progress = progress or (lambda line: None)
        self.device = target.device()
        self.exchange = folder / "exchange"
        self.exchange.mkdir(mode=0o700, exist_ok=True)
        self.in_memory = sandbox.make_memory_exchange(folder)    # where outputs fit in memory
        self.tampered: set[str] = set()
        self.unaudited: set[str] = set()   # torch calls seen only where no trial saw them
        self.last_wall_ms = 0.0
        self.sandbox: dict = {}
        self.summary: dict = {}
        self.policy: dict = {}       # the reference's baseline under --precision (policy.py)
        self.skipped: list[str] = []
        self.lines = candidate.splitlines()
        self.secret = random.SystemRandom().randrange(1 << 20, 1 << 40)   # seeds: see trial_plan
        self.construction: list[str] = []
        self.phases: dict[str, float] = {}       # seconds per phase, for `resources`
        self.clock = time.monotonic()

    # -- talking to the workers ------------------------------------------------------------------
    def ask_judge(self, *command) -> dict:
        self.tell_judge(command)
        return self.judge_reply()

    def tell_judge(self, command: tuple) -> None:
        self.judge.extend(max(self.options.timeout_s, 600.0))
        try:
            self.judge.send(command)
        except (WorkerFailure, OSError) as failure:
            raise ProblemError(f"{self.problem.label}: the reference itself failed: "
                               f"{failure}") from None

    def judge_reply(self) -> dict:
        try:
            reply = self.judge.recv()
        except (WorkerFailure, OSError) as failure:
            tail = getattr(failure, "log_tail", "")
            raise ProblemError(f"{self.problem.label}: the reference itself failed: {failure}. "
                               f"End of its log:\n{tail}") from None
        if "problem_error" in reply:
            raise ProblemError(problem_message(self.problem, reply["problem_error"]))
        return reply

    def ask_candidate(self, *command) -> dict:
        self.worker.extend(self.options.timeout_s)
        began = time.monotonic()
        self.worker.send(command)
        reply = self.received(command, self.worker.recv())
        self.last_wall_ms = (time.monotonic() - began) * 1e3     # the parent's own clock
        return reply

    def received(self, command: tuple, reply: dict) -> dict:
        """A reply of the candidate's worker, once its shape is checked (replies.py)."""
        try:
            replies.checked(command, reply)
        except ProtocolError as err:
            self.worker.kill()
            raise WorkerFailure("protocol", f"protocol violation in the reply to "
                                f"`{command[0]}`: {err}", self.worker.log.text_tail()) from None
        self.tampered.update(reply.get("tampered") or [])
        self.unaudited.update(reply.get("unaudited") or [])
        return reply

    # -- the protocol ----------------------------------------------------------------------------
    def run(self) -> Result:
        job = {"problem_source": self.problem.source, "problem_label": self.problem.label,
               "device": self.device, "init_seed": self.options.seed,
               "precision": "strict",               # the reference is always full fp32
               "policy": self.options.precision,    # what the comparison tolerates
               "memory_bytes": self.options.memory_bytes,
               "weights": str(self.folder / "weights.pt"),   # the candidate reads it
               "log": str(self.folder / "reference.log")}
        # building and checking on the CPU wait for (and hold off) a timing of the CPU
        self.working = contextlib.ExitStack()
        self.working.enter_context(cpu_work(self.device))
        self.judge = Worker("reference_main", job, max(self.options.timeout_s, 600.0),
                            self.options.memory_bytes)
        self.worker = None
        try:
            # The candidate is built while the reference checks its size and computes weights.
            self.worker = Worker("candidate_main", candidate_job(
                self.problem, self.candidate, self.target, self.options, self.folder,
                self.device, False), self.options.timeout_s, self.options.memory_bytes)
            try:
                ready = self.judge.recv()
            except WorkerFailure as failure:
                raise ProblemError(f"{self.problem.label}: the reference itself failed: "
                                   f"{failure}. End of its log:\n{failure.log_tail}") from None
            if "problem_error" in ready:
                raise ProblemError(problem_message(self.problem, ready["problem_error"]))
            return self.finished(self.judged())
        except WorkerFailure as failure:     # the candidate's worker died or overran
            return self.finished(tampering(runtime_failure(failure), sorted(self.tampered)))
        finally:
            self.working.close()
            for worker in (self.worker, self.judge):
                if worker is not None:
                    worker.close()
            if self.in_memory is not None:
                shutil.rmtree(self.in_memory, ignore_errors=True)

    def judged(self) -> Result:
        self.sandbox = sandbox_report(self.worker)
        built = self.received(("built",), self.worker.recv())
        if "failed" in built:
            return failure_result(built, self.target)
        made = self.ask_candidate("construct", str(self.folder / "weights.pt"))
        if "failed" in made:
            return failure_result(made, self.target)
        self.construction = [n for n in made.get("construction", []) if isinstance(n, str)]
        self.lap("start", "built and constructed")
        result = self.trials(made["weights"])
        self.lap("trials")
        self.working.close()               # the shared hold ends before the timing's own
        if result.state == CORRECT and self.options.measure:
            with timing_lock(self.device):
                try:
                    self.measure(result)
                except CandidateFailed as failed:     # e.g. out of memory while timed
                    self.overturn(result, failed.result)
                if result.state == CORRECT and self.options.measure_hook:
                    self.run_hook(result)
        if result.state == CORRECT and self.unaudited:
            self.overturn(result, unaudited_compute(sorted(self.unaudited)))
        return tampering(result, sorted(self.tampered))

    def lap(self, phase: str, said: str = "") -> None:
        now = time.monotonic()
        self.phases[phase] = round(now - self.clock, 3)
        self.progress(f"{said or phase} ({now - self.clock:.1f} s)")
        self.clock = now

    def trials(self, weights: str) -> Result:
        launches: Counter = Counter()
        report: dict = {}
        plan = self.options.trial_plan(self.secret)
        started = time.monotonic()
        for i, trial in enumerate(plan):
            if self.repeats_on_large_data(trial, plan[:i]):
                continue
            if not self.overlap(trial):
                prepared = self.ask_judge("prepare", i, trial)
                self.summary = self.summary or prepared.get("summary", {})
                path = self.exchange_path(f"trial{i}.bin")
                reply = None if "skipped" in prepared else \
                    self.ask_candidate("trial", i, prepared["prepared"], path)
            else:   # the reference computed while the candidate runs: both cores at work
                path = self.exchange_path(f"trial{i}.bin")
                self.tell_judge(("prepare", i, trial))
                reply = self.ask_candidate("trial", i, trial, path)
                prepared = self.judge_reply()
            if "skipped" in prepared:
                self.skipped.append(prepared["skipped"])
                continue
            refused = self.refused(reply)
            if refused:
                return refused
            launches.update(reply["audit"]["launches"])
            checked = self.ask_judge("check", path, reply["inputs_after"])
            if "bad_output" in checked:
                return bad_output(checked["bad_output"], f"trial {i + 1}")
            report = checked["report"]
            if not checked["ok"]:
                return Result(MISMATCH, checked["text"], correctness=Correctness(**report))
            self.progress(f"trial {i + 1} of {len(plan)} matches "
                          f"({time.monotonic() - started:.1f} s)")
            started = time.monotonic()
        if not launches and "*" not in self.options.guardrails.allow:
            return Result(REJECTED, "no kernel of the candidate's own ran during the trials (no "
                          "Triton launch, native library call, extension or Metal kernel): the "
                          "answer did not come from a kernel (rule `no-own-kernel`)",
                          rules=["no-own-kernel"], correctness=Correctness(**report))
        text = f"matches the reference on {report.get('passed_trials', 0)} trials"
        if self.skipped:
            text += "; " + "; ".join(self.skipped)
        if self.options.precision != "strict":
            text += f"; tolerances loosened for the {self.options.precision} precision policy"
        text += f"; weights {weights}"
        if launches:
            text += "; kernels launched: " + ", ".join(f"{kind} x{n}" for kind, n in
                                                      sorted(launches.items()))
        if self.construction:
            text += ("; its constructor computed with " + ", ".join(self.construction[:4]) +
                     " (once, before any input existed)")
        return Result(CORRECT, text, correctness=Correctness(**report))

    def data_bytes(self) -> int:
        return self.summary.get("input_bytes", 0) + self.summary.get("output_bytes", 0)

    def exchange_path(self, name: str) -> str:
        """Where the candidate writes outputs for the judge: memory, where they fit there
        beside both workers' data; else the run folder's exchange/ on disk."""
        room = available_memory() - 2 * self.data_bytes()
        fits = bool(self.summary) and self.summary.get("output_bytes", 0) < room
        return str((self.in_memory if self.in_memory and fits else self.exchange) / name)

    def overlap(self, trial: dict) -> bool:
        """Whether the judge may compute a trial's reference while the candidate runs it: on
        the CPU (a GPU's memory is the candidate's during its trial), once the first trial
        has told the sizes, where both workers' data fit in memory at once, and not for the
        other batch size (the judge settles it first)."""
        return (self.device == "cpu" and bool(self.summary) and not trial.get("batch") and
                4 * self.data_bytes() < available_memory())

    def repeats_on_large_data(self, trial: dict, before: list[dict]) -> bool:
        """Where a trial's data is large, one trial per distribution is enough (a gigabyte of
        values draws every case many times over) and each costs seconds: a trial of a
        distribution already tried is skipped, and the verdict says so."""
        data = self.data_bytes()
        if data < LARGE_TRIAL_BYTES or trial.get("batch") or \
                trial["distribution"] not in {t["distribution"] for t in before}:
            return False
        self.skipped.append(f"trial {trial['trial']} skipped: a {trial['distribution']} draw "
                            f"again, on {data / 2**30:.1f} GiB of data a trial")
        return True

    def refused(self, reply: dict) -> Result | None:
        """A failure, an output that is not a tensor, or torch computing the answer."""
        if "failed" in reply:
            return failure_result(reply, self.target)
        if reply.get("odd_output"):
            return Result(REJECTED, reply["odd_output"] + " (rule `output-not-a-tensor`)",
                          rules=["output-not-a-tensor"])
        compute = reply["audit"]["compute"]
        host = [c for c in compute if c.get("host")]
        if host:
            where = "; ".join(f"{c['op']}() at {self.line_text(c['where'])}" for c in host[:4])
            return Result(REJECTED, f"ModelNew.forward took tensor data out of torch: {where}; "
                          "what is computed on it in Python or NumPy is not a kernel (rule "
                          "`host-compute`)", rules=["host-compute"],
                          error={"type": "host-compute", "ops": host})
        if compute:
            where = "; ".join(f"aten.{c['op']} at {self.line_text(c['where'])}" for c in compute[:4])
            ops = sorted({c["op"] for c in compute})
            return Result(REJECTED, f"ModelNew.forward computed with torch instead of its kernel: "
                          f"{where} (rule `torch-compute-at-runtime`; allow an op deliberately "
                          f"with --allow {ops[0]})", rules=["torch-compute-at-runtime"],
                          error={"type": "torch-compute", "ops": compute})
        return None

    def line_text(self, where: str) -> str:
        if where.startswith("line "):
            n = int(where.split()[1])
            if 0 < n <= len(self.lines):
                return f"{where} (`{self.lines[n - 1].strip()}`)"
        return where

    # -- timing ----------------------------------------------------------------------------------
    def measure(self, result: Result) -> None:
        note = self.target.timing_note()
        sets = self.options.timing_sets(self.summary.get("input_bytes", 0), self.secret)
        self.policy = self.ask_judge("prepare_timing", sets).get("policy") or {}
        ready = self.ask_candidate("prepare_timing", sets)
        if "failed" in ready:
            return self.overturn(result, failure_result(ready, self.target))
        rounds = 1 if note else max(stats.MIN_ROUNDS, self.options.timing_rounds)
        sides = self.timing_sides(note)
        calls = {side: 2 for side in sides} if note else self.calibrate(rounds, sides)
        paired = self.interleave(rounds, calls, adaptive=not note)
        speedup = statistics.median(paired["ratios"]["judge"])
        rechecked = False
        if not note and speedup > SUSPICIOUS_SPEEDUP:
            again = self.interleave(rounds, calls)     # too good to believe once
            rechecked = True
            if statistics.median(again["ratios"]["judge"]) < speedup:
                paired, speedup = again, statistics.median(again["ratios"]["judge"])
        if self.check_timed_calls(result, paired["kept"]):
            return
        self.fill_timing(result, paired, speedup, rechecked, note)
        self.lap("timing")
        beyond = result.roofline.fraction_of_sol if result.timing.real else None
        if beyond and beyond > PHYSICS_LIMIT:
            return self.overturn(result, Result(
                REJECTED, f"faster than the hardware allows: {result.timing.candidate_ms:.4g} ms "
                f"a call is {beyond:.0f}x the speed of light of {result.roofline.device} "
                f"({result.roofline.speed_of_light_ms:.4g} ms for its "
                f"{result.roofline.bound}-bound minimum; rule `faster-than-hardware`)",
                rules=["faster-than-hardware"]))
        self.profile(result)
        self.lap("profile")
        self.read_counters(result)

    def timing_sides(self, note: str) -> tuple[str, ...]:
        """The blocks of a round: eager ("judge") and the candidate; under tf32/bf16/fp16 the
        reference as run under that policy ("policy"); where the baselines ask for it,
        torch.compile'd once by the judge ("compile", and "compile_policy" under the policy).
        A compile that fails is a note (self.compile_errors), never a figure."""
        self.compile_errors: dict[str, str] = {}
        with_policy = bool(self.policy.get("timed")) and not note
        sides = ["policy"] if with_policy else []
        if "compile" in self.options.baselines and not note:
            for side, under in (("compile_policy", True), ("compile", False)):
                if side == "compile_policy" and not with_policy:
                    continue
                reply = self.ask_judge("prepare_compile", under)
                if reply.get("compiled"):
                    sides.append(side)
                else:
                    self.compile_errors[side] = str(reply.get("error") or "it failed")
            self.lap("torch.compile")
        return tuple(sides) + ("judge", "candidate")

    def ask_side(self, side: str, calls: int, keep: list[int] = (), hold: bool = True) -> dict:
        """One timed block of `side` (see timing_sides)."""
        if side == "candidate":
            return self.ask_candidate("time", calls, list(keep), hold)
        return self.ask_judge("time", calls, side in ("policy", "compile_policy"),
                              side.startswith("compile"))

    def calibrate(self, rounds: int, sides: tuple[str, ...]) -> dict[str, int]:
        """Calls per block on each side, so that the fewest rounds together take about the
        budget."""
        per_block = self.options.timing_budget_s / (len(sides) * rounds)
        counts = {}
        for side in sides:
            reply = self.ask_side(side, 2)
            if "failed" in reply:
                raise CandidateFailed(failure_result(reply, self.target))
            samples = reply["samples"]
            # 50 calls a block at most: the rounds give hundreds of samples a side already;
            # 3 at least, but 1 for calls of a large problem (a 2 GiB ReLU: ~0.5 s a call)
            fewest = 1 if min(samples) > SLOW_CALL_MS else 3
            counts[side] = int(min(50, max(fewest, per_block / max(min(samples), 1e-6) * 1e3)))
        return counts

    def timing_cap_s(self) -> float:
        """How long the rounds may go on looking for a narrow interval (the fewest rounds
        always run)."""
        return min(TIMING_CAP_FACTOR * self.options.timing_budget_s, TIMING_CAP_S)

    def interleave(self, rounds: int, calls: dict[str, int], adaptive: bool = True) -> dict:
        """The sides in alternating blocks (ABBA order cancels drift: the order of a round is
        reversed in the next, so each side's mean position over two rounds is the same).
        `rounds` is the fewest; with `adaptive`, rounds are added until the interval of the
        speedup over eager is within ±5 % or the time cap is reached (stats.enough_rounds).
        Each round gives one ratio a side: that side's median over the candidate's. The
        candidate keeps the outputs of timed calls picked at random (all of them when there
        are few), so an answer that is right only on some calls cannot count on which. The
        CPU time of the machine, ours and the worker's is read around it all (busy)."""
        sides = tuple(calls)
        times = {side: [] for side in sides}
        ratios = {side: [] for side in sides if side != "candidate"}
        walls, clocked, kept = [], [], []
        # every output of a block held until it ends, where they fit (harness.time_calls)
        hold = calls["candidate"] * self.summary.get("output_bytes", 0) <= 1 << 30
        chooser = random.SystemRandom()
        checked_round = chooser.randrange(rounds)
        watch = self.cpu_watch()
        began = time.monotonic()
        stop = ""
        k = 0
        while True:
            order = sides if k % 2 == 0 else sides[::-1]
            block = {}
            for side in order:
                if side == "candidate":
                    few = calls[side] <= 4 and self.summary.get("output_bytes", 0) <= 256 << 20
                    keep = [] if k != checked_round else list(range(calls[side])) if few \
                        else [chooser.randrange(calls[side])]
                    block[side] = self.ask_side(side, calls[side], keep, hold)
                    if "failed" in block[side]:
                        raise CandidateFailed(failure_result(block[side], self.target))
                    candidate_wall = self.last_wall_ms
                    continue
                started = time.monotonic()
                block[side] = self.ask_side(side, calls[side])
                if side == "judge":
                    judge_wall = (time.monotonic() - started) * 1e3
            medians = {side: statistics.median(block[side]["samples"]) for side in sides}
            c = medians["candidate"]
            for side in sides:
                times[side].append(medians[side])
                if side != "candidate":
                    ratios[side].append(medians[side] / c if c > 0 else float("inf"))
            if block["candidate"].get("wall_ms"):
                walls.append(block["candidate"]["wall_ms"])
            if k == checked_round:
                kept = block["candidate"]["kept"]
            clocked.append((clocks.Block(block["judge"]["samples"], judge_wall),
                            clocks.Block(block["candidate"]["samples"], candidate_wall)))
            k += 1
            if not adaptive:
                if k >= rounds:
                    break
                continue
            done, stop = stats.enough_rounds(ratios["judge"], time.monotonic() - began,
                                             self.timing_cap_s(), min_rounds=rounds)
            if done:
                break
        lie = clocks.disagreement(clocked, passes=2 if self.device == "cuda" else 1)
        if lie:
            raise CandidateFailed(Result(REJECTED, f"{lie} (rule `clock-disagrees`)",
                                         rules=["clock-disagrees"]))
        return {"times": times, "ratios": ratios, "walls": walls, "stop": stop,
                "calls": calls, "kept": kept, "cpu": watch.stop() if watch else None}

    def cpu_watch(self) -> clocks.CpuWatch | None:
        """On the CPU: who else had it while timing (stats.busy_decision)."""
        if self.device != "cpu":
            return None
        worker = descendants(self.worker.pid)
        ours = [os.getpid(), *descendants(self.judge.pid), *worker]
        return clocks.CpuWatch(ours, worker).start()

    def check_timed_calls(self, result: Result, calls: list[int]) -> bool:
        """The kept timed calls' outputs must be right too (a memo or a skipped computation
        serves a stale answer once nobody seems to be checking)."""
        for call in calls:
            path = self.exchange_path(f"call{call}.bin")
            reply = self.ask_candidate("kept_output", call, path)
            refused = self.refused(reply)
            if refused is not None:
                break
            checked = self.ask_judge("check_sample", call, path)
            if "bad_output" in checked:
                refused = bad_output(checked["bad_output"], f"timed call {call + 1}")
                break
            if not checked["ok"]:
                refused = Result(MISMATCH, f"the output of timed call {call + 1} differs from "
                                 f"the reference on that call's inputs: {checked['text']}")
                break
        else:
            return False
        self.overturn(result, refused)
        return True

    @staticmethod
    def overturn(result: Result, by: Result) -> None:
        """A correct verdict undone during timing: the new state, its message and rules."""
        result.state, result.message, result.error = by.state, by.message, by.error
        result.rules = list(by.rules)

    def fill_timing(self, result: Result, paired: dict, speedup: float, rechecked: bool,
                    note: str) -> None:
        times, ratios = paired["times"], paired["ratios"]
        median = statistics.median(times["candidate"])
        eager = statistics.median(times["judge"])
        q = statistics.quantiles(ratios["judge"], n=4) if len(ratios["judge"]) >= 4 \
            else [speedup] * 3
        wall = statistics.median(paired["walls"]) if paired["walls"] else None
        factor = 1.0        # what the wall clock changes in every speedup
        if wall and wall > 3 * median and wall - median > 0.05:
            note = (f"device events saw {median:.4g} ms but a wall-clock loop {wall:.4g} ms "
                    "per call: work escapes the timed stream; the wall-clock figure is used")
            factor = median / wall
            speedup *= factor
            median = wall
        real = not note or note.startswith("device events")
        interval = lambda side: scaled(stats.median_interval(ratios[side]), factor)  # noqa: E731
        t = result.timing = Timing(
            real=real, note=note,
            device=devices.peaks(self.device)[0] if not note else self.device,
            candidate_ms=median, eager_ms=eager, candidate_spread=None,
            repeats=sum(paired["calls"][s] for s in ("judge", "candidate")) * len(
                ratios["judge"]),
            rechecked=rechecked, speedup_vs_eager=speedup,
            speedup_spread=(q[2] - q[0]) / speedup if speedup else None,
            rounds=len(ratios["judge"]),
            input_sets=len(self.options.timing_sets(self.summary.get("input_bytes", 0))))
        if real:
            t.speedup_vs_eager_ci = interval("judge")
            t.noise_note = stats.noise_sentence(ratios["judge"])
            t.noisy = bool(t.noise_note)
            if "compile" in ratios:
                t.compile_ms = statistics.median(times["compile"])
                t.speedup_vs_compile = statistics.median(ratios["compile"]) * factor
                t.speedup_vs_compile_ci = interval("compile")
        for side, error in getattr(self, "compile_errors", {}).items():
            under = f" under {self.policy.get('label')}" if side == "compile_policy" else ""
            t.note = (t.note + "; " if t.note else "") + \
                f"torch.compile{under} failed, so there is no figure beside it: {error}"
        if real:
            self.cached_baselines(t, eager)
        if paired.get("cpu"):
            cpu = paired["cpu"]
            t.busy, t.busy_note = stats.busy_decision(
                cpu["load1"], cpu["cores"], cpu["others_cores"], cpu["worker_cpu_s"],
                cpu["wall_s"], cpu["preempted"])
        self.fill_policy(t, paired, factor)
        dtype = (self.summary.get("output_dtypes") or ["torch.float32"])[0].replace("torch.", "")
        result.roofline = devices.roofline(self.summary.get("flops"), self.summary.get("min_bytes"),
                                           dtype, self.device, median if t.real else None,
                                           self.options.precision)

    def fill_policy(self, timing: Timing, paired: dict, factor: float) -> None:
        """The figures under the precision policy, beside the fp32 ones: eager and
        torch.compile under it from the same interleaved rounds (medians of paired ratios)."""
        if not self.policy or not timing.real:
            return
        timing.policy = self.policy["label"]
        if self.policy.get("same_as_fp32"):       # tf32 on the CPU: the fp32 figures, said so
            timing.eager_policy_ms, timing.compile_policy_ms = timing.eager_ms, timing.compile_ms
            timing.speedup_vs_eager_policy = timing.speedup_vs_eager
            timing.speedup_vs_compile_policy = timing.speedup_vs_compile
            return
        ratios, times = paired["ratios"], paired["times"]
        if "policy" not in ratios:                # not timed on this device: the label says why
            return
        timing.eager_policy_ms = statistics.median(times["policy"])
        timing.speedup_vs_eager_policy = statistics.median(ratios["policy"]) * factor
        if "compile_policy" in ratios:
            timing.compile_policy_ms = statistics.median(times["compile_policy"])
            timing.speedup_vs_compile_policy = statistics.median(ratios["compile_policy"]) * factor

    def cached_baselines(self, timing: Timing, eager_ms: float) -> None:
        """The torch.compile figure of an earlier evaluation of this problem on this device,
        kept in cache_dir()/baselines: a display with its age (compile_cached_ms,
        compile_cached_age_s), never in a ratio, and shown only where this evaluation has no
        figure of its own. This evaluation's figure, when it has one, replaces it."""
        import torch
        knobs = sorted((k, v) for k, v in os.environ.items() if k.startswith("KFORGE_")
                       and k != "KFORGE_CACHE")
        key = hashlib.sha256(json.dumps(["side-by-side", self.problem.source, self.device,
                                         torch.__version__, knobs,
                                         devices.gpu_name() if self.device == "cuda" else ""]
                                        ).encode()).hexdigest()[:20]
        path = cache_dir() / "baselines" / f"{key}.json"
        if timing.compile_ms is None:
            try:
                entry = json.loads(path.read_text())
                ms, at = float(entry["compile_ms"]), float(entry["measured_at"])
            except (OSError, ValueError, KeyError, TypeError):
                return
            if math.isfinite(ms) and ms > 0:
                timing.compile_cached_ms = ms
                timing.compile_cached_age_s = round(max(0.0, time.time() - at), 1)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        artifacts.write_json(path, {"compile_ms": timing.compile_ms, "eager_ms": eager_ms,
                                    "measured_at": time.time()})

    def profile(self, result: Result) -> None:
        """Several calls profiled on each side, the median one's events shown; where the
        profiled call and the timed median differ by more than 2x, a sentence says so."""
        trace, ref_trace = self.folder / "trace.json", self.folder / "reference_trace.json"
        written = self.exchange / "trace.json"      # where the candidate's worker may write
        reply = self.ask_candidate("profile", str(written))
        if "failed" in reply:
            raise CandidateFailed(failure_result(reply, self.target))
        transfer.copy_out(str(written), str(trace))
        reference = self.ask_judge("profile", str(ref_trace))
        result.profile = {"candidate_events": reply["events"],
                          "reference_events": reference["events"],
                          "trace": str(trace), "reference_trace": str(ref_trace),
                          "profiled_calls": len(reply.get("calls_ms") or []) or 1}
        note = profile_note(reply, reference, result.timing)
        if note:
            result.profile["note"] = note

    def read_counters(self, result: Result) -> None:
        """Nsight Compute's counters for one forward, where ncu can read them and the options
        ask (never a verdict: a failure is a note in the profile)."""
        prefix = nsight.command(self.target.name) if self.options.ncu else None
        over, speedup = self.options.ncu_over, result.timing.speedup_vs_eager
        if not prefix or not self.device.startswith("cuda") or (
                over is not None and (speedup is None or speedup < over)):
            return
        trial = {"seed": self.options.seed + NSIGHT_SEED, "distribution": "given"}
        self.worker.extend(NSIGHT_TIMEOUT_S + 30)
        try:
            command = ("nsight", prefix, str(self.folder / "weights.pt"), trial,
                       NSIGHT_TIMEOUT_S)
            self.worker.send(command)
            reply = self.received(command, self.worker.recv())
        except (WorkerFailure, OSError) as failure:     # the verdict stands without them
            reply = {"ncu_error": f"the candidate's worker stopped while ncu ran: {failure}"}
        result.profile.update({k: reply[k] for k in ("ncu_csv", "ncu_error") if k in reply})
        self.lap("nsight")

    def run_hook(self, result: Result) -> None:
        """The user's measure(model, inputs) on each side, inputs drawn as a trial's are. What
        it raises, returns wrongly or a worker that dies meanwhile is reported in
        `result.measures`, never in the verdict (the candidate's tampering still counts)."""
        trial = {"seed": self.options.seed + HOOK_SEED, "distribution": "given"}
        command = ("measure_hook", self.options.measure_hook, self.options.measure_label, trial)
        answers = {}
        for side, worker in (("reference", self.judge), ("candidate", self.worker)):
            worker.extend(self.options.timeout_s)
            try:
                worker.send(command)
                answer = worker.recv()
                if worker is self.worker:
                    answer = self.received(command, answer)
                failed = answer.get("failed")    # an error outside the hook's own code
                answers[side] = answer if not failed else \
                    {"errors": [f"{failed['type']}: {failed['text'][:300]}"]}
            except (WorkerFailure, OSError) as failure:
                answers[side] = {"errors": [f"its worker stopped while measuring: {failure}"]}
        result.measures = measures.combine(self.options.measure_label, answers["reference"],
                                           answers["candidate"])
        self.lap("measure hook")

    def finished(self, result: Result) -> Result:
        """What every verdict carries: where the candidate ran, and the memory it took."""
        result.sandbox = self.sandbox or {"enabled": self.options.sandbox}
        if not self.options.sandbox:
            result.message += " | " + sandbox.summary(result.sandbox)
        gib = lambda n: round(n / 2**30, 3)  # noqa: E731
        result.resources = {"reference_peak_gib": gib(self.judge.peak_rss),
                            "candidate_peak_gib": gib(self.worker.peak_rss if self.worker else 0),
                            "input_gib": gib(self.summary.get("input_bytes", 0)),
                            "min_gib_moved": gib(self.summary.get("min_bytes") or 0),
                            "seconds": self.phases}
        return result


def scaled(interval: tuple[float, float] | None, factor: float) -> list[float] | None:
    return [interval[0] * factor, interval[1] * factor] if interval else None


def profile_note(candidate: dict, reference: dict, timing: Timing) -> str:
    """A sentence where a profiled call (its events' total, as the Profile tab shows them)
    and the timed median differ by more than PROFILE_GAP times, on either side; else ""."""
    if not timing.real:
        return ""
    said = []
    for name, reply, timed in (("candidate", candidate, timing.candidate_ms),
                               ("reference", reference, timing.eager_ms)):
        events = reply.get("events") or []
        profiled = sum(e["duration_us"] for e in events) / 1e3 if events else None
        if not profiled or not timed:
            continue
        gap = max(profiled / timed, timed / profiled)
        if gap > PROFILE_GAP:
            said.append(f"the {name}'s profiled call took {profiled:.4g} ms where its timed "
                        f"median is {timed:.4g} ms ({gap:.1f}x)")
    if not said:
        return ""
    calls = len(candidate.get("calls_ms") or []) or 1
    return ("; ".join(said) + f" (the median of {calls} profiled calls): the profiler's own "
            "cost or another moment's load is in the profile; read its events against each "
            "other, and the timing for the time")


def problem_message(problem: Problem, err: dict) -> str:
    if err.get("type") in ("TooLarge", "BadInputs"):
        return f"{problem.label}: {err['text']}"
    where = f" line {err['line']} ({err['source_line']})" if err.get("line") else ""
    return (f"{problem.label}{where}: running the reference raised {err['type']}: "
            f"{err['text']}{allocation_size(err['text'])}. Check Model, get_inputs() and "
            "get_init_inputs().")


def allocation_size(text: str) -> str:
    """Allocators say a failed request in bytes; a person reads GiB."""
    found = re.search(r"tried to allocate (\d+) bytes", text)
    return f" ({int(found.group(1)) / 2**30:.1f} GiB in one allocation)" if found else ""


def failure_result(message: dict, target: Target) -> Result:
    failed = message["failed"]
    tampered = message.get("tampered") or []
    where = f"line {failed['line']}: " if failed.get("line") else ""
    if failed["state"] == COMPILE_FAILURE:
        text = f"{target.name} build failed, {where}{failed['text'].strip()[:1500]}"
    elif failed.get("kind") == "gpu_out_of_memory":
        text = f"GPU out of memory during {failed['phase']}, {where}{failed['text'][:600]}"
    else:
        text = (f"{failed['type']} during {failed['phase']}, {where}{failed['text'][:1500]}"
                f"{allocation_size(failed['text'][:1500])}")
    result = Result(failed["state"], text, error=failed)
    return tampering(result, tampered) if tampered else result


def bad_output(why: str, where: str) -> Result:
    """An output file the judge could not read as tensors: the candidate's fault, never the
    reference's."""
    text = f"protocol violation: the output file of {where} is not what the harness writes: {why}"
    return Result(RUNTIME_ERROR, text, error={"type": "protocol", "text": text})


def unaudited_compute(calls: list[str]) -> Result:
    """Torch computed where the trials' audit did not see it: on a thread, or only in calls
    outside the trials (the warm-up, the timed calls, the profile)."""
    return Result(REJECTED, "ModelNew computed with torch where the trials' audit did not see "
                  f"it: {'; '.join(calls[:4])} (rule `torch-compute-at-runtime`: every call is "
                  "watched, not only the trials)", rules=["torch-compute-at-runtime"],
                  error={"type": "torch-compute", "unaudited": calls})


def tampering(result: Result, tampered: list[str]) -> Result:
    if not tampered:
        return result
    result.rules.append("tampering")
    result.message = (f"the candidate replaced {', '.join(tampered)} (rule `tampering`); its own "
                      f"outcome was {result.state}: {result.message}")
    result.state = REJECTED
    return result


__all__ = ["evaluate", "EvalOptions", "Guardrails", "ProblemError"]
