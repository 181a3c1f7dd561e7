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
    side of each round too; where the session names its best so far (options.rival), that
    kernel is a side too, in a sandboxed worker of its own (rival.py), and the head-to-head of
    the blocks' low quantiles is the verdict's `timing.versus`. A time below the outputs' bytes
    at the hardware's guaranteed bandwidth is `faster-than-hardware` (physics.py). Profiles (the
    median of several calls), roofline (a display: a beaten ceiling is flagged, never refused).
 6. Your own measurement (--measure): the hook runs on the reference in the judge and on the
    candidate in its worker, on inputs drawn from one seed; its failures are reported in
    `measures`, never in the verdict.
 7. Anything the candidate patched is named and the verdict becomes `rejected`.
 8. Artifacts: candidate, result.json, logs and traces in one folder.
"""
from __future__ import annotations

import contextlib
import random
import re
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Callable

from ... import artifacts, measures
from ...baselines import long_name
from ...problem import NULL_BYTE, Problem, decode_source, null_byte_line
from ...pyparse import parse_ast
from ...result import (COMPILE_FAILURE, CORRECT, MISMATCH, REJECTED, UNAVAILABLE, Correctness,
                       Result)
from ...targets import Target, get_target
from ..sandbox import layout
from ..wire import messages
from .device_lock import cpu_work, timing_lock
from .jobs import candidate_job, reference_job
from .options import EvalOptions
from .process import Worker, WorkerFailure, available_memory
from .rival import Rival
from .talk import WorkerTalk, checked_reply, sandbox_report
from .timing import TimedRounds
from .verdicts import (CandidateFailed, bad_output, failure_result, inline, overturn,
                       printable, runtime_failure, tampering, unaudited_compute)

LARGE_TRIAL_BYTES = 1 << 30     # inputs and outputs of a trial beyond this: fewer trials


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
        if undecodable else verdict_of(problem, candidate, target, options, folder, progress)
    result.target, result.artifacts = target.name, str(folder)
    result.elapsed_s = round(time.monotonic() - started, 3)
    artifacts.write_json(folder / "result.json", result.to_dict())
    return result


def verdict_of(problem: Problem, candidate: str, target: Target, options: EvalOptions,
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
        # where a rule fired quotes the candidate's text (a user's --ban regex matches any of
        # it, line breaks included): escaped, on the rule's own line
        lines = [f"{rule.name}: {rule.reason} ({'; '.join(map(inline, where[:3]))})"
                 for rule, where in fired]
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


def compile_only(problem: Problem, candidate: str, target: Target, options: EvalOptions,
                 folder: Path) -> Result | None:
    """Build the candidate where it cannot run: a compile error is still reported."""
    job = candidate_job(problem, candidate, target, options, folder, "cpu", True)
    worker = Worker("candidate_main", job, options.timeout_s, options.memory_bytes)
    try:
        sandbox_report(worker)
        message = checked_reply(worker, ("built",), worker.recv())
        return failure_result(message, target) if "failed" in message else None
    except WorkerFailure as failure:
        return runtime_failure(failure)
    finally:
        worker.close()


class Evaluation:
    """One candidate against one problem: the parent's side of both workers' protocol. It
    holds `talk` (talk.py: the two workers, the commands sent and the replies checked) and,
    for a correct candidate, `timer` (timing.py: the timed rounds; figures.py: their
    numbers); the trials and the verdict are here. Each `talk.ask_judge("check", ...)` is
    served by Judge.check (worker/judge.py), each `talk.ask_candidate("trial", ...)` by
    Candidate.trial (worker/candidate.py): a command is the worker's method of that name."""

    def __init__(self, problem: Problem, candidate: str, target: Target, options: EvalOptions,
                 folder: Path, progress: Callable[[str], None] | None = None):
        self.problem, self.candidate, self.target = problem, candidate, target
        self.options, self.folder = options, folder
        self.progress = progress or (lambda line: None)
        self.device = target.device()
        self.exchange = folder / "exchange"
        self.exchange.mkdir(mode=0o700, exist_ok=True)
        self.in_memory = layout.make_memory_exchange(folder)    # where outputs fit in memory
        self.talk = WorkerTalk(problem, options)
        self.timer: TimedRounds | None = None     # once the candidate is correct and timed
        self.summary: dict = {}      # the judge's of the problem: sizes, FLOPs, dtypes
        self.rival: Rival | None = None   # the best so far, timed beside it (rival.py)
        self.rival_void = ""              # why its worker did not start, where one was asked
        self.skipped: list[str] = []
        self.lines = candidate.splitlines()
        self.secret = random.SystemRandom().randrange(1 << 20, 1 << 40)   # seeds: see trial_plan
        self.construction: list[str] = []
        self.phases: dict[str, float] = {}       # seconds per phase, for `resources`
        self.clock = time.monotonic()

    # -- the protocol ----------------------------------------------------------------------------
    def run(self) -> Result:
        job = reference_job(self.problem, self.options, self.folder, self.device)
        # building and checking on the CPU wait for (and hold off) a timing of the CPU
        self.working = contextlib.ExitStack()
        self.working.enter_context(cpu_work(self.device))
        self.talk.start_judge(job)
        try:
            # The candidate is built while the reference checks its size and computes weights.
            self.talk.start_candidate(candidate_job(
                self.problem, self.candidate, self.target, self.options, self.folder,
                self.device, False))
            self.start_rival()
            self.talk.judge_reply()              # ready: its reference built, weights saved
            return self.finished(self.judged())
        except WorkerFailure as failure:     # the candidate's worker died or overran
            return self.finished(tampering(runtime_failure(failure), sorted(self.talk.tampered)))
        except CandidateFailed as failed:    # the judge stopped where the candidate reaches it
            return self.finished(failed.result)
        finally:
            self.working.close()
            self.talk.close()
            if self.rival is not None:
                self.rival.close()
            if self.in_memory is not None:
                shutil.rmtree(self.in_memory, ignore_errors=True)

    def start_rival(self) -> None:
        """The best so far's worker, built while the candidate is (where a head-to-head is
        asked for and the candidate will be timed)."""
        if not (self.options.rival and self.options.measure):
            return
        try:
            self.rival = Rival(self.problem, self.options.rival, self.options.rival_id,
                               self.target, self.options, self.folder, self.device)
        except (WorkerFailure, OSError) as failure:
            self.rival_void = f"its worker did not start: {failure}"

    def judged(self) -> Result:
        talk = self.talk
        talk.read_sandbox_report()
        built = talk.received(("built",), talk.candidate.recv())
        if "failed" in built:
            return failure_result(built, self.target)
        made = talk.ask_candidate("construct", str(self.folder / "weights.pt"))
        if "failed" in made:
            return failure_result(made, self.target)
        self.construction = made["construction"]
        self.lap("start", "built and constructed")
        result = self.trials(made["weights"])
        self.lap("trials")
        self.working.close()               # the shared hold ends before the timing's own
        if result.state == CORRECT and self.options.measure:
            with timing_lock(self.device):
                self.say_compiling()
                self.timer = TimedRounds(
                    talk, self.problem, self.target, self.options, self.folder,
                    summary=self.summary, secret=self.secret, exchange=self.exchange,
                    exchange_path=self.exchange_path, refused=self.refused, lap=self.lap,
                    rival=self.rival, rival_void=self.rival_void)
                try:
                    self.timer.time_and_profile(result)
                except CandidateFailed as failed:     # e.g. out of memory while timed
                    overturn(result, failed.result)
                self.name_compile_mode(result.timing)
                if result.state == CORRECT and self.options.measure_hook:
                    self.run_hook(result)
        if result.state == CORRECT and talk.unaudited:
            overturn(result, unaudited_compute(sorted(talk.unaudited)))
        return tampering(result, sorted(talk.tampered))

    def say_compiling(self) -> None:
        """Before the timing: that it starts by compiling the reference (max-autotune takes
        minutes on a CPU, and the line would otherwise sit on "trials" all that time)."""
        if "compile" in self.options.baselines and not self.target.timing_note():
            self.progress(f"timing: compiling the reference with "
                          f"{long_name(self.options.compile_mode)} first")

    def name_compile_mode(self, timing) -> None:
        """The timing says which torch.compile its compile figures are of."""
        if timing is not None and (timing.compile_ms is not None or
                                   timing.speedup_vs_compile is not None):
            timing.compile_mode = self.options.compile_mode

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
                prepared = self.talk.ask_judge("prepare", i, trial)
                self.summary = self.summary or prepared.get("summary", {})
                path = self.exchange_path(f"trial{i}.bin")
                reply = None if "skipped" in prepared else \
                    self.talk.ask_candidate("trial", i, prepared["prepared"], path)
            else:   # the reference computed while the candidate runs: both cores at work
                path = self.exchange_path(f"trial{i}.bin")
                self.talk.tell_judge(("prepare", i, trial))
                reply = self.talk.ask_candidate("trial", i, trial, path)
                prepared = self.talk.judge_reply()
            if "skipped" in prepared:
                self.skipped.append(prepared["skipped"])
                continue
            refused = self.refused(reply)
            if refused:
                return refused
            launches.update(reply["audit"]["launches"])
            checked = self.talk.ask_judge("check", path, reply["inputs_after"])
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
            # said, not held against it: nn.Linear's own init calls kaiming_uniform_
            text += ("; torch functions its constructor called (allowed: once, before any "
                     "input existed): " + ", ".join(self.construction[:4]))
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
        """`line N` of an audit's report with the candidate's line N beside it."""
        line = re.fullmatch(r"line (\d{1,9})", where)
        n = int(line.group(1)) if line else 0
        if 0 < n <= len(self.lines):
            return f"{where} (`{printable(self.lines[n - 1].strip())}`)"
        return where

    def run_hook(self, result: Result) -> None:
        """The user's measure(model, inputs) on each side, inputs drawn as a trial's are. What
        it raises, returns wrongly or a worker that dies meanwhile is reported in
        `result.measures`, never in the verdict (the candidate's tampering still counts)."""
        # a seed of its own drawn from the secret, as the trials' and the timed calls' are: a
        # fixed one let the candidate know it was measured, and the hook's inputs in advance
        trial = {"seed": self.options.seed_for(self.secret, "hook"), "distribution": "given"}
        command = ("measure_hook", self.options.measure_hook, self.options.measure_label, trial)
        answers = {}
        for side, worker, role in (("reference", self.talk.judge, messages.JUDGE),
                                   ("candidate", self.talk.candidate, messages.CANDIDATE)):
            worker.extend(self.options.timeout_s)
            try:
                worker.send(messages.outgoing(role, command))
                answer = worker.recv()
                if role == messages.CANDIDATE:
                    answer = self.talk.received(command, answer)
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
        result.sandbox = self.talk.sandbox or {"enabled": self.options.sandbox}
        if not self.options.sandbox:
            result.message += " | " + layout.one_line(result.sandbox)
        gib = lambda n: round(n / 2**30, 3)  # noqa: E731
        judge, candidate = self.talk.judge, self.talk.candidate
        result.resources = {"reference_peak_gib": gib(judge.peak_rss),
                            "candidate_peak_gib": gib(candidate.peak_rss if candidate else 0),
                            "input_gib": gib(self.summary.get("input_bytes", 0)),
                            "min_gib_moved": gib(self.summary.get("min_bytes") or 0),
                            "seconds": self.phases}
        if self.timer is not None and self.timer.outside_cores:
            # the cores each worker used while others were timed
            result.resources["outside_cores"] = self.timer.outside_cores
        if self.timer is not None and self.timer.redraw_ms is not None:
            # integer inputs drawn anew per timed call, or left as drawn where this was slow
            result.resources["redraw_ms"] = round(self.timer.redraw_ms, 3)
        return result
