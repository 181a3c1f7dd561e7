"""The rival: the best candidate so far, timed beside the one being judged, in the same
interleaved rounds, so that which of the two is faster is decided by the two kernels side by
side and never by their ratios to an eager time taken at other moments (session/standing.py).

The rival is model-written code too, so it runs in a worker of its own, sandboxed like the
candidate's, in its own folder (`rival/` of the judging's folder). It was judged correct
earlier; here it is only built, constructed with the same weights and timed, and its kept timed
calls are checked by the judge as the candidate's are. Nothing it does can touch the
candidate's verdict: a rival that fails, overruns, replies out of shape or answers wrongly
voids the head-to-head (`RivalFailed`, said in the verdict), and the candidate's judging goes on
without it.
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from ... import artifacts
from ...problem import Problem
from ...targets import Target
from . import replies
from ..sandbox import layout
from ..wire import messages
from .jobs import candidate_job
from .options import EvalOptions
from .process import Worker, WorkerFailure
from .talk import sandbox_report
from .verdicts import its_words
from ..wire.framing import ProtocolError


class RivalFailed(Exception):
    """Why the head-to-head was void (the candidate's verdict stands without it)."""


class Rival:
    """The best-so-far's worker: started beside the candidate's, asked only to build,
    construct, prepare and time, and to hand back kept outputs."""

    def __init__(self, problem: Problem, code: str, ident: str, target: Target,
                 options: EvalOptions, folder: Path, device: str):
        self.ident, self.options = ident, options
        self.folder = folder / "rival"
        self.folder.mkdir(exist_ok=True)
        (self.folder / "exchange").mkdir(mode=0o700, exist_ok=True)
        artifacts.write_text(self.folder / "candidate.py", code)
        self.in_memory = layout.make_memory_exchange(self.folder)
        self.last_wall_ms = 0.0
        self.closed = False
        self.worker = Worker("candidate_main", candidate_job(
            problem, code, target, options, self.folder, device, False),
            options.timeout_s, options.memory_bytes)

    @property
    def pid(self) -> int:
        return self.worker.pid

    def ready(self, weights: Path) -> None:
        """Built and constructed with the judge's weights (a copy in its own folder: its
        sandbox reads nothing of the candidate's)."""
        self.ask_frame(lambda: sandbox_report(self.worker), "its sandbox report")
        built = self.checked(("built",), self.ask_frame(self.worker.recv, "its build"))
        if "failed" in built:
            raise RivalFailed(f"it failed to build: {failure_text(built)}")
        mine = self.folder / "weights.pt"
        try:
            os.link(weights, mine)
        except OSError:
            shutil.copyfile(weights, mine)
        made = self.ask("construct", str(mine))
        if "failed" in made:
            raise RivalFailed(f"it failed to construct: {failure_text(made)}")

    def ask(self, *command) -> dict:
        self.worker.extend(self.options.timeout_s)
        began = time.monotonic()
        try:
            self.worker.send(messages.outgoing(messages.CANDIDATE, command))
        except (WorkerFailure, OSError) as failure:
            raise RivalFailed(f"its worker stopped: {failure}") from None
        reply = self.checked(command, self.ask_frame(self.worker.recv, f"`{command[0]}`"))
        self.last_wall_ms = (time.monotonic() - began) * 1e3
        if "failed" in reply:
            raise RivalFailed(f"`{command[0]}` failed: {failure_text(reply)}")
        if reply.get("tampered"):
            raise RivalFailed("it patched " + ", ".join(map(str, reply["tampered"][:4])))
        return reply

    def ask_frame(self, read, what: str) -> dict:
        try:
            return read()
        except (WorkerFailure, OSError) as failure:
            raise RivalFailed(f"its worker stopped while waiting for {what}: {failure}") from None

    def checked(self, command: tuple, reply: dict) -> dict:
        try:
            return replies.checked(command, reply)
        except ProtocolError as err:
            self.worker.kill()
            raise RivalFailed(f"protocol violation in the reply to `{command[0]}`: {err}") \
                from None

    def exchange_path(self, name: str) -> str:
        return str((self.in_memory or self.folder / "exchange") / name)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.worker.close()
        if self.in_memory is not None:
            shutil.rmtree(self.in_memory, ignore_errors=True)


def failure_text(reply: dict) -> str:
    """The rival's failure in the evaluator's words: its exception's name (replies.failure
    checked it), its text quoted (control characters escaped, several lines behind QUOTE)."""
    failed = reply.get("failed") or {}
    return f"{failed.get('type', 'an error')}{its_words(str(failed.get('text', '')), 300)}"
