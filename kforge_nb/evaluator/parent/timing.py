"""Timing a correct candidate (step 5): the sides of a round, calls per block calibrated to the
budget, the rounds interleaved in ABBA order until the speedup's interval is narrow, timed calls
of every block checked again, the clocks cross-checked, the roofline's physics limit, then the
profiles and Nsight Compute's counters."""
from __future__ import annotations

import os
import random
import statistics
import time
from pathlib import Path
from typing import Callable

from ...baselines import long_name
from ...problem import Problem
from ...result import MISMATCH, REJECTED, Result
from ...targets import Target
from . import clocks, figures, stats
from ..wire import messages, transfer
from ..worker import nsight
from .figures import profile_note
from .options import EvalOptions
from .process import WorkerFailure, descendants
from .rival import Rival, RivalFailed
from .talk import WorkerTalk
from .verdicts import CandidateFailed, bad_output, failure_result, overturn

SUSPICIOUS_SPEEDUP = 10.0
# a worker's process tree may use this many cores while other sides are timed (an idle worker
# waiting on its socket uses ~0; OpenMP threads sleep between regions, OMP_WAIT_POLICY=PASSIVE;
# a worker still finishing its loop is waited for, clocks.Outside.before)
# (measured here: honest ReLU and OpenMP softmax workers 0.0001-0.003 cores; a thread left
# spinning beside two other test runs on 2 cores 0.1)
OUTSIDE_CORES = 0.03

NSIGHT_TIMEOUT_S = 150.0
# the interleaved rounds go on until the interval is narrow, for at most this many times the
# timing budget, and never more than TIMING_CAP_S (the fewest rounds always run)
TIMING_CAP_FACTOR = 4.0
BUSY_CAP_FACTOR = 4.0    # ... and this many times longer again while the CPU is contested
TIMING_CAP_S = 120.0
SLOW_CALL_MS = 100.0            # calls this slow are timed one a block
FEW_CALLS = 4                   # the judge checks every timed call of a block this short
LARGE_OUTPUT = 256 << 20        # ... one call a block where outputs are this large


class TimedRounds:
    """The timing of one correct candidate, held by its Evaluation: it talks to the workers
    through `talk` (talk.py), has the candidate's replies refused by `refused` and its outputs
    placed by `exchange_path` (the Evaluation's), and keeps its phases with `lap`. It owns what
    the timing finds: the policy's baseline, the compile errors, the rival's fate, the cores
    used outside a side's own time."""

    def __init__(self, talk: WorkerTalk, problem: Problem, target: Target, options: EvalOptions,
                 folder: Path, *, summary: dict, secret: int, exchange: Path,
                 exchange_path: Callable[[str], str],
                 refused: Callable[[dict], Result | None], lap: Callable[[str], None],
                 rival: Rival | None = None, rival_void: str = ""):
        self.talk, self.problem, self.target, self.options = talk, problem, target, options
        self.folder, self.device = folder, target.device()
        self.summary, self.secret = summary, secret    # the trials' sizes; the seeds' secret
        self.exchange, self.exchange_path = exchange, exchange_path
        self.refused, self.lap = refused, lap
        self.rival = rival              # the best so far, timed beside it (rival.py)
        self.rival_void = rival_void    # why there is no head-to-head, where one was asked
        self.rival_wrong = False        # ... because the rival's timed output was wrong
        self.policy: dict = {}          # the reference's baseline under --precision (policy.py)
        self.compile_errors: dict[str, str] = {}     # a side's torch.compile that failed
        self.outside_cores: dict[str, float] = {}    # for result.resources
        self.redraw_ms: float | None = None  # the judge's draw of a set, where it has integers

    def time_and_profile(self, result: Result) -> None:
        note = self.target.timing_note()
        sets = self.options.timing_sets(self.summary.get("input_bytes", 0), self.secret)
        prepared = self.talk.ask_judge("prepare_timing", sets)
        self.policy = prepared.get("policy") or {}
        # the judge's word on drawing integer inputs anew per call, followed by every side
        sets = [{**s, "redraw": bool(prepared.get("redraw"))} for s in sets]
        self.redraw_ms = prepared.get("redraw_ms")
        ready = self.talk.ask_candidate("prepare_timing", sets)
        if "failed" in ready:
            return overturn(result, failure_result(ready, self.target))
        self.ready_rival(sets, note)
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
        self.fill_timing(result, paired, speedup, rechecked, note)
        self.lap("timing")
        # the physics floor: the outputs' bytes at the guaranteed bandwidth (physics.py); a
        # beaten roofline (measured ceilings, the reference's FLOPs) is only flagged
        from . import physics
        refused = physics.check(result, self.summary, self.device)
        if refused:
            return overturn(result, Result(REJECTED, refused, rules=["faster-than-hardware"]))
        self.profile(result)
        self.lap("profile")
        self.read_counters(result)

    def timing_sides(self, note: str) -> tuple[str, ...]:
        """The blocks of a round: eager ("judge") and the candidate; under tf32/bf16/fp16 the
        reference as run under that policy ("policy"); where the baselines ask for it,
        torch.compile'd once by the judge ("compile", and "compile_policy" under the policy).
        A compile that fails is a note (self.compile_errors), never a figure."""
        with_policy = bool(self.policy.get("timed")) and not note
        sides = ["policy"] if with_policy else []
        if "compile" in self.options.baselines and not note:
            for side, under in (("compile_policy", True), ("compile", False)):
                if side == "compile_policy" and not with_policy:
                    continue
                reply = self.talk.ask_judge("prepare_compile", under)
                if reply.get("compiled"):
                    sides.append(side)
                else:
                    self.compile_errors[side] = str(reply.get("error") or "it failed")
            self.lap(long_name(self.options.compile_mode))
        rival = ("rival",) if self.rival is not None and not self.rival_void else ()
        return tuple(sides) + ("judge", "candidate") + rival

    def ready_rival(self, sets: list[dict], note: str) -> None:
        """The rival built, constructed and given the same input sets (where there is one and
        the timing is a performance figure); a failure voids the head-to-head."""
        if self.rival is None or self.rival_void:
            return
        if note:
            return self.void_rival(f"no head-to-head: {note}")
        try:
            self.rival.ready(self.folder / "weights.pt")
            self.rival.ask("prepare_timing", sets)
        except RivalFailed as failed:
            self.void_rival(str(failed))

    def check_rival_calls(self, calls: list[int]) -> None:
        """The rival's kept timed calls must be right too, or the head-to-head is void
        (RivalFailed) and the rival is dropped from the standing (`rival_wrong`)."""
        for call in calls:
            path = self.rival.exchange_path(f"call{call}.bin")
            reply = self.rival.ask("kept_output", call, path)
            checked = {"bad_output": reply["odd_output"]} if reply.get("odd_output") else \
                self.talk.ask_judge("check_sample", call, path, reply["inputs_after"])
            if "bad_output" in checked or not checked.get("ok"):
                why = checked.get("bad_output") or checked.get("text", "")
                self.rival_wrong = True     # the best so far is not: the session drops it
                raise RivalFailed(f"its output of timed call {call + 1} was wrong: {why}")

    def ask_side(self, side: str, calls: int, chooser: random.SystemRandom | None = None,
                 fastest: bool = False) -> dict:
        """One timed block of `side` (see timing_sides). With a `chooser` (every block but
        calibration's), timed calls of the candidate's and the rival's blocks drawn before the
        block (checked_calls), and with `fastest` its fastest call, are checked by the judge as
        soon as the block ends, so that no block goes unchecked (a wrong one ends the judging:
        CandidateFailed; voids the head-to-head: RivalFailed). With `fastest` the reference's
        blocks copy out their fastest call too, so both sides pay the same between calls."""
        if side in ("candidate", "rival"):
            keep = self.checked_calls(chooser, calls) if chooser is not None else []
            fastest = fastest and chooser is not None
            if side == "candidate":
                block = self.talk.ask_candidate("time", calls, keep, fastest)
                if "failed" not in block:
                    checked_after(self.talk, lambda: self.check_timed_calls(to_check(block)))
            else:
                block = self.rival.ask("time", calls, keep, fastest)
                checked_after(self.rival, lambda: self.check_rival_calls(to_check(block)))
            return block
        return self.talk.ask_judge("time", calls, side in ("policy", "compile_policy"),
                                   side.startswith("compile"), fastest)

    def calibrate(self, rounds: int, sides: tuple[str, ...]) -> dict[str, int]:
        """Calls per block on each side, so that the fewest rounds together take about the
        budget."""
        per_block = self.options.timing_budget_s / (len(sides) * rounds)
        counts = {}
        for side in sides:
            if side == "rival":
                try:
                    reply = self.ask_side(side, 2)
                except RivalFailed as failed:
                    self.void_rival(str(failed))
                    continue
            else:
                reply = self.ask_side(side, 2)
            if "failed" in reply:
                raise CandidateFailed(failure_result(reply, self.target))
            samples = reply["samples"]
            # 50 calls a block at most: the rounds give hundreds of samples a side already;
            # 3 at least, but 1 for calls of a large problem (a 2 GiB ReLU: ~0.5 s a call)
            fewest = 1 if min(samples) > SLOW_CALL_MS else 3
            counts[side] = int(min(50, max(fewest, per_block / max(min(samples), 1e-6) * 1e3)))
        return counts

    def timing_cap_s(self, watch: clocks.CpuWatch | None = None) -> float:
        """How long the rounds may go on looking for a narrow interval (the fewest rounds
        always run); four times longer where the CPU has been contested so far (`watch`):
        beside two busy loops a round's ratio swings with the scheduler's slices, and only
        more rounds narrow the median (docs/noise-2026-11-26.md)."""
        cap = TIMING_CAP_FACTOR * self.options.timing_budget_s
        if watch is not None and busy_so_far(watch):
            cap *= BUSY_CAP_FACTOR
        return min(cap, TIMING_CAP_S)

    def interleave(self, rounds: int, calls: dict[str, int], adaptive: bool = True) -> dict:
        """The sides in alternating blocks (ABBA order cancels drift: the order of a round is
        reversed in the next, so each side's mean position over two rounds is the same).
        `rounds` is the fewest; with `adaptive`, rounds are added until the interval of the
        speedup over eager is within ±5 % and the head-to-head with the rival is decided (or
        narrow), or the time cap is reached (stats.enough_rounds, stats.settled). Each round
        gives one ratio a side: that side's median over the candidate's; and each block its
        low time (stats.block_low), which noise that only adds time leaves alone: on the CPU
        its fastest call, else its p20. In every block of the candidate (and the rival) timed
        calls picked by a secret random are checked (checked_calls), and on the CPU its fastest
        call, so an answer that is right only on some calls or in some rounds cannot count on
        which, nor set the block's time by skipping its work. The CPU time of the machine, ours
        and the workers' is read around it all."""
        sides = list(calls)
        times = {side: [] for side in sides}
        lows = {side: [] for side in sides}
        ratios = {side: [] for side in sides if side not in ("candidate", "rival")}
        walls, clocked, rival_clocked = [], [], []
        chooser = random.SystemRandom()
        # on the CPU a block's time is its fastest call, which the judge checks; on a GPU its
        # p20, as measured before (a kept copy would sit in device memory between calls)
        fastest = self.device == "cpu"
        low_q = stats.FASTEST if fastest else stats.LOW_QUANTILE
        watch = self.cpu_watch()
        outside = self.outside_watch()
        began = time.monotonic()
        stop = ""
        k = 0
        while True:
            order = sides if k % 2 == 0 else sides[::-1]
            block = {}
            if outside is not None:
                outside.new_round(descendants)
            for side in order:
                cpu_before = outside.before(side) if outside is not None else None
                if side in ("candidate", "rival"):
                    if side == "rival":
                        try:
                            block[side] = self.ask_side(side, calls[side], chooser, fastest)
                        except RivalFailed as failed:
                            self.void_rival(str(failed))
                            continue
                        rival_wall = self.rival.last_wall_ms
                        if outside is not None:
                            outside.after(side, cpu_before, rival_wall / 1e3)
                        continue
                    block[side] = self.ask_side(side, calls[side], chooser, fastest)
                    if "failed" in block[side]:
                        raise CandidateFailed(failure_result(block[side], self.target))
                    candidate_wall = self.talk.last_wall_ms
                    if outside is not None:
                        outside.after(side, cpu_before, candidate_wall / 1e3)
                    continue
                started = time.monotonic()
                block[side] = self.ask_side(side, calls[side], fastest=fastest)
                if outside is not None:
                    outside.after(side, cpu_before, time.monotonic() - started)
                if side == "judge":
                    judge_wall = (time.monotonic() - started) * 1e3
            if "rival" in sides and "rival" not in block:     # it failed in this round
                sides.remove("rival")
            medians = {side: statistics.median(block[side]["samples"]) for side in sides}
            c = medians["candidate"]
            for side in sides:
                times[side].append(medians[side])
                lows[side].append(stats.block_low(block[side]["samples"], low_q))
                if side in ratios:
                    ratios[side].append(medians[side] / c if c > 0 else float("inf"))
            if block["candidate"].get("wall_ms"):
                walls.append(block["candidate"]["wall_ms"])
            clocked.append((clocks.Block(block["judge"]["samples"], judge_wall),
                            clocks.Block(block["candidate"]["samples"], candidate_wall)))
            if "rival" in sides:
                rival_clocked.append((clocked[-1][0],
                                      clocks.Block(block["rival"]["samples"], rival_wall)))
            k += 1
            if not adaptive:
                if k >= rounds:
                    break
                continue
            elapsed, cap = time.monotonic() - began, self.timing_cap_s(watch)
            done, stop = stats.enough_rounds(ratios["judge"], elapsed, cap, min_rounds=rounds)
            if stop == "narrow" and "rival" in sides and not stats.settled(stats.head_to_head(
                    lows["rival"], lows["candidate"], stats.SELF_NOISE_FLOOR_CPU
                    if self.device == "cpu" else stats.SELF_NOISE_FLOOR, low_q)):
                # the decision needs more rounds than the figure, within the same caps
                done = k >= stats.MAX_ROUNDS or elapsed + elapsed / k > cap
                stop = "cap" if done else ""
            if done:
                break
        passes = 2 if self.device == "cuda" else 1
        lie = clocks.disagreement(clocked, passes=passes)
        if lie:
            raise CandidateFailed(Result(REJECTED, f"{lie} (rule `clock-disagrees`)",
                                         rules=["clock-disagrees"]))
        busy_elsewhere = outside.cores("candidate") if outside is not None else None
        if outside is not None:         # said in result.resources
            self.outside_cores = {side: round(outside.cores(side) or 0.0, 4)
                                  for side in outside.roots}
        if busy_elsewhere is not None and busy_elsewhere > OUTSIDE_CORES:
            raise CandidateFailed(Result(
                REJECTED, f"the candidate's processes kept {busy_elsewhere:.2f} cores busy while "
                "the other sides were timed (a thread or child left working slows whoever is "
                "timed and flatters the candidate; rule `works-outside-its-time`)",
                rules=["works-outside-its-time"]))
        if "rival" in sides:
            lie = clocks.disagreement(rival_clocked, passes=passes)
            rival_elsewhere = outside.cores("rival") if outside is not None else None
            if lie:
                self.void_rival(f"its clock disagrees with the parent's: {lie}")
                sides.remove("rival")
            elif rival_elsewhere is not None and rival_elsewhere > OUTSIDE_CORES:
                self.void_rival(f"its processes kept {rival_elsewhere:.2f} cores busy while the "
                                "candidate was timed")
                sides.remove("rival")
        return {"times": times, "lows": lows, "low_q": low_q, "ratios": ratios, "walls": walls,
                "stop": stop, "calls": calls, "rival": "rival" in sides,
                "cpu": watch.reading() if watch else None}

    def fill_timing(self, result: Result, paired: dict, speedup: float, rechecked: bool,
                    note: str) -> None:
        """The rounds' numbers into the verdict (figures.py), the head-to-head among them."""
        figures.fill_timing(result, paired, speedup, rechecked, note, options=self.options,
                            summary=self.summary, device=self.device,
                            reference_source=self.problem.source, policy=self.policy,
                            compile_errors=self.compile_errors)
        result.timing.versus = figures.versus(paired, self.options, self.device,
                                              self.rival_void, self.rival_wrong)

    def void_rival(self, why: str) -> None:
        """The head-to-head is off (the candidate's judging goes on): said in its verdict."""
        self.rival_void = self.rival_void or why
        if self.rival is not None:
            self.rival.close()

    def outside_watch(self) -> clocks.Outside | None:
        """The CPU the candidate's (and the rival's) process tree takes while other sides are
        timed (clocks.Outside)."""
        roots = {"candidate": self.talk.candidate.pid}
        if self.rival is not None and not self.rival_void:
            roots["rival"] = self.rival.pid
        return clocks.Outside(roots)

    def cpu_watch(self) -> clocks.CpuWatch | None:
        """On the CPU: who else had it while timing (stats.busy_decision). The processes the
        candidate (or the rival) started are not ours (clocks.serving)."""
        if self.device != "cpu":
            return None
        worker = descendants(self.talk.candidate.pid)
        ours = [os.getpid(), *descendants(self.talk.judge.pid),
                *clocks.serving(self.talk.candidate.pid, worker)]
        if self.rival is not None and not self.rival_void:
            ours += clocks.serving(self.rival.pid, descendants(self.rival.pid))
        return clocks.CpuWatch(ours, worker).start()

    def checked_calls(self, chooser: random.SystemRandom, calls: int) -> list[int]:
        """Which calls of a block the judge checks, drawn by a secret random: all of a few
        small ones; one where outputs are large; else one at random and each other call with
        probability 1/calls. The worker copies a kept call's outputs as it returns, which a
        candidate may notice by the pause after, too late for that call: however many checked
        calls it has seen, each call to come may still be checked, and no block goes
        unchecked."""
        output = self.summary.get("output_bytes", 0)
        if calls <= FEW_CALLS and output <= LARGE_OUTPUT:
            return list(range(calls))
        one = chooser.randrange(calls)
        if output > LARGE_OUTPUT:
            return [one]
        return [k for k in range(calls) if k == one or chooser.random() < 1 / calls]

    def check_timed_calls(self, calls: list[int]) -> None:
        """The kept timed calls' outputs must be right too (a memo or a skipped computation
        serves a stale answer once nobody seems to be checking): each against the reference
        on that call's inputs, by the judge; and their inputs left alone, as a trial's (a
        kernel that writes over its inputs only in timed calls, where the refill undoes it,
        has the time of a kernel the trials refuse). A wrong one ends the judging
        (CandidateFailed)."""
        for call in calls:
            path = self.exchange_path(f"call{call}.bin")
            reply = self.talk.ask_candidate("kept_output", call, path)
            refused = self.refused(reply)
            if refused is None:
                checked = self.talk.ask_judge("check_sample", call, path, reply["inputs_after"])
                if "bad_output" in checked:
                    refused = bad_output(checked["bad_output"], f"timed call {call + 1}")
                elif "modified" in checked:
                    refused = Result(MISMATCH, f"input {checked['modified']} was modified in "
                                     f"place by timed call {call + 1} (timed calls are held to "
                                     "the trials' rules)")
                elif not checked["ok"]:
                    refused = Result(MISMATCH, f"the output of timed call {call + 1} differs "
                                     f"from the reference on that call's inputs: "
                                     f"{checked['text']}")
            if refused is not None:
                raise CandidateFailed(refused)

    def profile(self, result: Result) -> None:
        """Several calls profiled on each side, the median one's events shown; where the
        profiled call and the timed median differ by more than 2x, a sentence says so."""
        trace, ref_trace = self.folder / "trace.json", self.folder / "reference_trace.json"
        written = self.exchange / "trace.json"      # where the candidate's worker may write
        reply = self.talk.ask_candidate("profile", str(written))
        if "failed" in reply:
            raise CandidateFailed(failure_result(reply, self.target))
        transfer.copy_out(str(written), str(trace))
        reference = self.talk.ask_judge("profile", str(ref_trace))
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
        trial = {"seed": self.options.seed_for(self.secret, "nsight"), "distribution": "given"}
        candidate = self.talk.candidate
        candidate.extend(NSIGHT_TIMEOUT_S + 30)
        try:
            command = ("nsight", prefix, str(self.folder / "weights.pt"), trial,
                       NSIGHT_TIMEOUT_S)
            candidate.send(messages.outgoing(messages.CANDIDATE, command))
            reply = self.talk.received(command, candidate.recv())
        except (WorkerFailure, OSError) as failure:     # the verdict stands without them
            reply = {"ncu_error": f"the candidate's worker stopped while ncu ran: {failure}"}
        result.profile.update({k: reply[k] for k in ("ncu_csv", "ncu_error") if k in reply})
        self.lap("nsight")


def busy_so_far(watch: clocks.CpuWatch) -> bool:
    """The busy verdict on what the watch has seen until now."""
    seen = watch.reading()
    return stats.busy_decision(seen["load1"], seen["cores"], seen["others_cores"],
                               seen["worker_cpu_s"], seen["wall_s"], seen["preempted"])[0]


def to_check(block: dict) -> list[int]:
    """The call numbers of a block the judge checks: those kept by draw, and its fastest."""
    fastest = block.get("fastest")
    return block["kept"] + ([fastest] if fastest is not None and fastest not in block["kept"]
                            else [])


def checked_after(worker, check) -> None:
    """Run `check` after a timed block of `worker` (the WorkerTalk, for the candidate's, or
    the Rival), leaving its `last_wall_ms` the block's own: the clocks compare that one."""
    wall = worker.last_wall_ms
    try:
        check()
    finally:
        worker.last_wall_ms = wall
