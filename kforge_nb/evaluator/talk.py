"""The parent's side of the conversation with both workers: a command sent, a reply read under
the worker's deadline, the candidate's replies checked for shape (replies.py) and for what they
say was patched or computed unseen. A judge that fails is the problem's fault (ProblemError)."""
from __future__ import annotations

import time

from ..problem import ProblemError
from . import replies
from .process import Worker, WorkerFailure
from .verdicts import problem_message
from .wire import ProtocolError


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
    """Mixed into Evaluation: `self.judge` and `self.worker` are its two Workers, and
    `self.tampered` / `self.unaudited` collect what the candidate's replies say."""

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
        try:
            self.worker.send(command)
        except OSError:
            pass      # its end is closed: waiting for the reply says why (its exit, a deadline)
        reply = self.received(command, self.worker.recv())
        self.last_wall_ms = (time.monotonic() - began) * 1e3     # the parent's own clock
        return reply

    def received(self, command: tuple, reply: dict) -> dict:
        """A reply of the candidate's worker, once its shape is checked (replies.py)."""
        reply = checked_reply(self.worker, command, reply)
        self.tampered.update(reply["tampered"])
        self.unaudited.update(reply.get("unaudited", []))
        return reply
