"""The evaluator's one message table: every command the parent sends a worker, which worker
serves it, what it is sent with, and how its reply is checked.

The parent (parent/talk.py, parent/rival.py) sends nothing the table does not give that
worker, and each worker's loop (Judge.serve in worker/judge.py, Candidate.serve in
worker/candidate.py) serves only its own rows, so no other method of a worker is reachable over
its socket. The judge runs kforge's code and the reference, and its replies are taken as they
come; the candidate's worker runs model-written code, so each of its replies is reduced to the
shape its row names (parent/replies.py SHAPES) before any of it is used. Read one judging in
this order: parent/protocol.py (the steps), this table (what each step asks), the two workers
(what they do), parent/replies.py (what a candidate's answer may hold).
"""
from __future__ import annotations

from dataclasses import dataclass

JUDGE, CANDIDATE = "judge", "candidate"
STOP = "stop"           # ends either worker's loop; no reply
BUILT = "built"         # the candidate's first frame once its code is built: no command asks


@dataclass(frozen=True)
class Command:
    does: str
    args: tuple[str, ...]          # what it is sent with, in order
    optional: int = 0              # how many of the last `args` may be left out
    reply: str = ""                # the candidate's: its shape in replies.SHAPES


TABLE: dict[str, dict[str, Command]] = {
    JUDGE: {
        "prepare": Command("draw trial `index`'s inputs and run the reference on them",
                           ("index", "trial")),
        "check": Command("compare the candidate's output file with the reference's",
                         ("path", "inputs_after")),
        "prepare_timing": Command("draw the timing's input sets", ("trials",)),
        "time": Command("a block of timed reference calls (eager, under the policy, compiled)",
                        ("calls", "under_policy", "compiled", "fastest"), optional=3),
        "prepare_compile": Command("torch.compile the reference for the timed rounds",
                                   ("under_policy",), optional=1),
        "check_sample": Command("check one kept timed call of the candidate's",
                                ("call", "path", "inputs_after")),
        "profile": Command("the reference's profiler trace", ("trace",)),
        "measure_hook": Command("the user's measure() on the reference", ("source", "label",
                                                                          "trial")),
    },
    CANDIDATE: {
        "construct": Command("build ModelNew with the reference's weights", ("weights_path",),
                             reply="construct"),
        "trial": Command("run trial `index` under audit, its output to `path`",
                         ("index", "trial", "path"), reply="trial"),
        "prepare_timing": Command("draw the timing's input sets", ("trials",),
                                  reply="prepare_timing"),
        "time": Command("a block of timed calls, the outputs of `keep` (and the fastest) kept",
                        ("calls", "keep", "fastest"), optional=1, reply="time"),
        "kept_output": Command("write a kept timed call's output to `path`", ("call", "path"),
                               reply="kept_output"),
        "profile": Command("the candidate's profiler trace", ("trace",), reply="profile"),
        "nsight": Command("one call under Nsight Compute",
                          ("prefix", "weights", "trial", "timeout_s"), reply="nsight"),
        "measure_hook": Command("the user's measure() on the candidate",
                                ("source", "label", "trial"), reply="measure_hook"),
    },
}


def reply_shape(command: str) -> str:
    """The shape (replies.SHAPES) the candidate's reply to `command` must have."""
    return BUILT if command == BUILT else TABLE[CANDIDATE][command].reply


def fits(role: str, frame) -> bool:
    """Whether `frame` (command, *args) is a row of `role`'s table with an allowed count of
    arguments."""
    if not isinstance(frame, (list, tuple)) or not frame or not isinstance(frame[0], str):
        return False
    row = TABLE[role].get(frame[0])
    return row is not None and len(row.args) - row.optional <= len(frame) - 1 <= len(row.args)


def outgoing(role: str, frame: tuple) -> tuple:
    """The parent's side: `frame`, once it is a row of `role`'s table (a frame that is not is
    kforge's own mistake, said before anything is sent)."""
    if frame[:1] != (STOP,) and not fits(role, frame):
        raise ValueError(f"no command {frame[0]!r} with {len(frame) - 1} argument(s) in the "
                         f"{role}'s message table")
    return frame


def incoming(role: str, frame) -> tuple[str, tuple]:
    """The worker's side: (command, args) of a frame the parent sent, where it is `role`'s
    to serve; "stop" ends the loop. Anything else stops the worker with the reason."""
    if isinstance(frame, (list, tuple)) and tuple(frame[:1]) == (STOP,):
        return STOP, ()
    if not fits(role, frame):
        raise ValueError(f"the {role} serves no such command: {str(frame)[:200]}")
    return frame[0], tuple(frame[1:])
