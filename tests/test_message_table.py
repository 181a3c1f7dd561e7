"""The evaluator's message table (evaluator/wire/messages.py) is the protocol: every command the
parent may send names a method of the worker that serves it with the same arguments, every
candidate reply names a shape replies.py checks, and neither side gets past it."""
from __future__ import annotations

import inspect
from multiprocessing import Pipe

import pytest

from kforge_nb.evaluator.parent import replies
from kforge_nb.evaluator.wire import messages
from kforge_nb.evaluator.worker.candidate import Candidate
from kforge_nb.evaluator.worker.judge import Judge

SERVERS = {messages.JUDGE: Judge, messages.CANDIDATE: Candidate}
# methods of a worker's loop that are not commands (construct is served before the loop)
NOT_COMMANDS = {"serve", "forward", "audited_forward"}


@pytest.mark.parametrize("role", sorted(SERVERS))
def test_each_row_is_a_method_with_its_arguments(role):
    for command, row in messages.TABLE[role].items():
        if command == "construct":
            continue
        method = getattr(SERVERS[role], command)
        params = list(inspect.signature(method).parameters.values())[1:]      # self
        assert tuple(p.name for p in params) == row.args, command
        defaults = sum(p.default is not inspect.Parameter.empty for p in params)
        assert defaults == row.optional, command


@pytest.mark.parametrize("role", sorted(SERVERS))
def test_each_method_a_parent_can_reach_is_a_row(role):
    public = {name for name, _ in inspect.getmembers(SERVERS[role], inspect.isfunction)
              if not name.startswith("_")}
    assert public - NOT_COMMANDS == set(messages.TABLE[role]) - {"construct"}


def test_every_candidate_reply_has_a_shape_and_every_shape_a_reply():
    named = {row.reply for row in messages.TABLE[messages.CANDIDATE].values()}
    assert all(named) and named | {messages.BUILT} == set(replies.SHAPES)


@pytest.mark.parametrize("frame", [("baselines",), ("time",), ("time", 5, True, False, True, 1),
                                   ("kept_output", 3, "p"), ("__init__",), ()])
def test_the_parent_sends_no_frame_outside_the_judges_rows(frame):
    with pytest.raises((ValueError, IndexError)):
        messages.outgoing(messages.JUDGE, frame)


def test_the_parent_sends_a_row_with_its_optional_arguments_left_out():
    assert messages.outgoing(messages.JUDGE, ("time", 5)) == ("time", 5)
    assert messages.outgoing(messages.CANDIDATE, ("time", 5, [0])) == ("time", 5, [0])
    assert messages.outgoing(messages.CANDIDATE, ("stop",)) == ("stop",)


@pytest.mark.parametrize("frame", [["forward", [1]], ["serve"], ["__class__"], ["check"], "stop",
                                   [7]])
def test_a_judge_serves_nothing_outside_its_rows(frame):
    """A real Judge over a real pipe: a method that is not a row (forward, serve), a dunder, a
    row with too few arguments or a frame of the wrong shape stops it before anything runs."""
    parent, child = Pipe()
    judge = Judge(child, {}, None, None, "cpu", 0)
    parent.send(frame)
    with pytest.raises(ValueError, match="serves no such command"):
        judge.serve()
    assert not parent.poll()                 # nothing was answered


def test_a_judge_stops_on_stop():
    parent, child = Pipe()
    parent.send(["stop"])
    Judge(child, {}, None, None, "cpu", 0).serve()
