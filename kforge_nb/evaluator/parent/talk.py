"""The parent's side of the conversation with both workers: a command sent, a reply read under
the worker's deadline, the candidate's replies checked for shape (replies.py) and for what they
say was patched or computed unseen. A judge whose reference raises is the problem's fault
(ProblemError); a judge that stops otherwise is never said to be the reference's."""
from __future__ import annotations

import time

from ...problem import Problem, ProblemError
from ...result import RUNTIME_ERROR, Result
from . import replies
from ..wire import messages
from .options import EvalOptions
from .process import Worker, WorkerFailure
from .verdicts import CandidateFailed, end_of_log, judge_stopped, problem_message
from ..wire.framing import ProtocolError


def checked_reply(worker: Worker, command: tuple, reply: dict) -> dict:
    """A reply of a candidate's worker, reduced to its shape (replies.py); a reply out of shape
    ends the worker and is its protocol violation."""
    try:
        return replies.checked(command, reply)
    except ProtocolError as err:
        worker.kill()
        raise WorkerFailure("protocol", f"protocol violation in the reply to `{command[0]}`: "
                            f"{err}", worker.log.text_tail()) from None


def sandbox_report(worker: Worker) -> dict:
    """The worker's first frame: what its sandbox holds, sent before the candidate's code ran."""
    report = worker.recv().get("sandbox")
    if not isinstance(report, dict):
        worker.kill()
        raise WorkerFailure("protocol", "protocol violation: the worker's first frame is not "
                            "its sandbox report")
    return report


class WorkerTalk:
    """The two workers of one judging and the conversation with them, held by its Evaluation:
    `judge` and `candidate` are the Workers (started by start_judge / start_candidate);
    `tampered` and `unaudited` collect what the candidate's replies say, `sandbox` is its
    sandbox report, `judge_step` what the judge was last asked, `last_wall_ms` the parent's
    clock around the candidate's last reply."""

    def __init__(self, problem: Problem, options: EvalOptions):
        self.problem, self.options = problem, options
        self.judge: Worker | None = None
        self.candidate: Worker | None = None
        self.sandbox: dict = {}
        self.tampered: set[str] = set()
        self.unaudited: set[str] = set()   # torch calls seen only where no trial saw them
        self.judge_step = "ready"
        self.last_wall_ms = 0.0

    def judge_timeout_s(self) -> float:
        """The judge's deadline for a step: the reference may take minutes on a large problem,
        whatever the candidate's timeout."""
        return max(self.options.timeout_s, 600.0)

    def start_judge(self, job: dict) -> None:
        self.judge = Worker("reference_main", job, self.judge_timeout_s(),
                            self.options.memory_bytes)

    def start_candidate(self, job: dict) -> None:
        self.candidate = Worker("candidate_main", job, self.options.timeout_s,
                                self.options.memory_bytes)

    def read_sandbox_report(self) -> None:
        self.sandbox = sandbox_report(self.candidate)

    def close(self) -> None:
        for worker in (self.candidate, self.judge):
            if worker is not None:
                worker.close()

    def ask_judge(self, *command) -> dict:
        self.tell_judge(command)
        return self.judge_reply()

    def tell_judge(self, command: tuple) -> None:
        self.judge.extend(self.judge_timeout_s())
        self.judge_step = command[0]
        try:
            self.judge.send(messages.outgoing(messages.JUDGE, command))
        except OSError:
            pass      # its end is closed: waiting for the reply says why (its exit status)
        except WorkerFailure as failure:
            raise self.judge_stopped(failure) from None

    def judge_reply(self) -> dict:
        try:
            reply = self.judge.recv()
        except (WorkerFailure, OSError) as failure:
            raise self.judge_stopped(failure) from None
        if "problem_error" in reply:
            raise ProblemError(problem_message(self.problem, reply["problem_error"]))
        return reply

    def judge_stopped(self, failure: WorkerFailure | OSError) -> Exception:
        """The judge stopped without reporting an exception of the reference (those come as
        `problem_error`): killed, exited, overran. Never said as the reference's failure.
        Where the candidate's processes could signal it (they share its PID namespace: no
        sandbox), the candidate's runtime_error (CandidateFailed); else the problem's
        evaluation cannot go on (ProblemError), the judge's log quoted."""
        said = judge_stopped(failure, self.judge_step)
        if self.candidate_reaches_judge():
            return CandidateFailed(Result(
                RUNTIME_ERROR, f"{said}; the candidate's processes share its PID namespace (no "
                "sandbox) and could signal it, so the verdict is the candidate's",
                error={"type": "judge_stopped", "text": said}))
        tail = end_of_log(getattr(failure, "log_tail", ""))
        return ProblemError(f"{self.problem.label}: {said}; no exception of the reference was "
                            "reported (a crash in native code, the machine's out-of-memory killer "
                            "or a signal from outside)" + (f". End of its log:\n{tail}" if tail
                                                            else ""))

    def candidate_reaches_judge(self) -> bool:
        """Whether the candidate's processes can signal the judge: its worker's sandbox report
        says its processes are not isolated (or, before the report came, no sandbox was
        asked for)."""
        said = self.sandbox.get("processes") if self.sandbox else None
        return not self.options.sandbox if said is None else \
            not str(said).startswith("isolated")

    def ask_candidate(self, *command) -> dict:
        self.candidate.extend(self.options.timeout_s)
        began = time.monotonic()
        try:
            self.candidate.send(messages.outgoing(messages.CANDIDATE, command))
        except OSError:
            pass      # its end is closed: waiting for the reply says why (its exit, a deadline)
        reply = self.received(command, self.candidate.recv())
        self.last_wall_ms = (time.monotonic() - began) * 1e3     # the parent's own clock
        return reply

    def received(self, command: tuple, reply: dict) -> dict:
        """A reply of the candidate's worker, once its shape is checked (replies.py)."""
        reply = checked_reply(self.candidate, command, reply)
        self.tampered.update(reply["tampered"])
        self.unaudited.update(reply.get("unaudited", []))
        return reply
