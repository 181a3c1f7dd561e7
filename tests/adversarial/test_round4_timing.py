"""Trust, round four (issue 37, item 2): timed calls a candidate cannot tell from trials, and
timing it cannot forge.

The red team's attacks, each a real candidate judged by the real evaluator:

* a timed call's seed was 2**20 + k (a trial's the evaluation's number + i): a kernel that
  knew it was timed protected its output's pages and computed them in a fault handler when the
  kept call's copy first read them, after the clock had stopped. Now every seed is drawn from
  the evaluation's secret, and every page of every timed output is read before its call's
  clock stops: the lazy answer is timed with its call;
* timed inputs were their set's pristine values times one factor: a memo keyed on x[0] / x[1]
  served a stored product rescaled. Now each element gets its own factors;
* children started with syscall(SYS_fork) spun while eager was timed: refused
  (`works-outside-its-time`), and never counted as the parent's own CPU;
* and what each of those leans on: only one round's timed calls were checked. Now calls of
  every block are, picked by a secret random.

The EXPLOITS rows end `mismatch` or `rejected`; the attacks that now simply compute (their
answers were always right, only their timing was false) end `correct`, and the tests below
read what the candidate itself recorded in its sandbox folder to show the timing is its own.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kforge_nb.evaluator import evaluate
from kforge_nb.evaluator.parent import clocks
from kforge_nb.evaluator.parent.process import descendants
from kforge_nb.result import CORRECT, MISMATCH, REJECTED
from tests.adversarial.support import REPO, problem, source
from tests.adversarial.test_exploits import Case, judge_case  # noqa: F401 (a fixture)

EXPLOITS = {
    "children forked with syscall(SYS_fork) spin while the others are timed": Case(
        "relu", "r4t_fork_spinners", REJECTED, ["works-outside-its-time"],
        says=["cores busy while the other sides were timed"]),
    "wrong once the first rounds are over: every block's timed calls are checked": Case(
        "relu", "r4t_wrong_in_later_rounds", MISMATCH,
        says_re=r"the output of timed call \d+ differs from the reference on that call's inputs"),
}


@pytest.mark.parametrize("name", list(EXPLOITS))
def test_round4_timing_exploit_is_refused(name, judge_case):
    case = EXPLOITS[name]
    result = judge_case(case)
    assert result.state == case.state, f"{name}: {result.state}: {result.message}"
    assert result.rules == case.rules, result.message
    for fragment in case.says:
        assert fragment in result.message, result.message
    if case.says_re:
        assert re.search(case.says_re, result.message), result.message


def recorded(result, name: str):
    """What the candidate wrote in its sandbox folder ($HOME), kept with the artifacts."""
    return json.loads((Path(result.artifacts) / "sandbox" / name).read_text())


def judged(problem_name: str, candidate: str, options):
    return evaluate(problem(problem_name), source(candidate), "cpp", options())


def test_an_answer_computed_when_first_read_is_timed_with_its_call(options):
    """Every page of a timed call's outputs is read before its clock stops: the fault handler
    that computes a protected output when it is first read runs inside the call's time. Each
    timed call's time holds its own lazy computation, so the candidate's time is at least
    about what the handler measured (red team: 1.3-2x where the honest kernel is 0.15-0.52x)."""
    result = judged("r4t_softmax_wide", "r4t_lazy_output", options)
    assert result.state == CORRECT, result.message
    lazy = recorded(result, "lazy.json")
    assert lazy["lazy"] >= 10, lazy            # it did leave its outputs to be computed later
    assert result.timing.candidate_ms >= 0.5 * lazy["median_ms"], (result.timing, lazy)


def test_a_memo_keyed_on_ratios_of_values_is_never_served(options):
    """Each element of a timed call's inputs is its set's value times factors of its own, so
    x[0] / x[1] is as new in every call as x is: the memo that served a product rescaled
    (the inputs' factors times the stored product) never hits, trials or timing."""
    result = judged("r4t_matmul", "r4t_scale_memo", options)
    assert result.state == CORRECT, result.message
    assert result.timing.rounds >= 6
    stats = recorded(result, "memo_hits.json")
    assert stats["calls"] > 8 and stats["hits"] == 0, stats     # timed calls counted too


def test_no_seed_tells_a_timed_call_from_a_trial(options):
    """The seeds of trials, the warm-up, the timed and the profiled calls are all drawn from
    the evaluation's secret, independently: no two lie near each other (consecutive trials'
    seeds and a timed call's 2**20 + k did), so none says which kind of call it is."""
    result = judged("relu", "r4t_seed_watch", options)
    assert result.state == CORRECT, result.message
    seeds = sorted(recorded(result, "seeds.json"))
    assert len(seeds) > 16
    assert min(b - a for a, b in zip(seeds, seeds[1:])) > 1 << 24, seeds[:8]


# --- the candidate's processes are its own ------------------------------------------------------

# A worker as the fork server starts a sandboxed one (zygote.become_init: the process outside,
# PID 1 of a PID namespace of its own, the worker under it), where this host allows a PID
# namespace; the worker then forks a child, as a candidate's library may.
WORKER = """
import os, time
from kforge_nb.evaluator.sandbox import libc
from kforge_nb.evaluator.wire import zygote
try:
    libc.sys_unshare(libc.CLONE_NEWPID)
    zygote.become_init(os.open(os.devnull, os.O_RDONLY))     # returns in the worker
except OSError:
    pass                                                     # no namespace: the worker is this
if os.fork() == 0:
    time.sleep(60)
    os._exit(0)
time.sleep(60)
"""


def test_processes_a_candidate_starts_are_never_counted_as_the_workers_own():
    """The busy watch counts the worker's own processes as ours (clocks.serving); a child the
    candidate forked is not, so its CPU is competition, never the timing's own work."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    worker = subprocess.Popen([sys.executable, "-c", WORKER], env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            tree = descendants(worker.pid)
            leaves = [p for p in tree if not descendants(p)[1:]]
            if len(tree) >= 2 and (len(tree) == 4 or namespace_refused(tree)):
                break
            assert time.monotonic() < deadline, tree
            time.sleep(0.05)
        own = clocks.serving(worker.pid, tree)
        assert len(leaves) == 1 and leaves[0] not in own
        assert sorted(own) == sorted(p for p in tree if p != leaves[0])
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()


def namespace_refused(tree: list[int]) -> bool:
    """The worker's tree is two processes because this host gave it no PID namespace."""
    return len(tree) == 2 and len(clocks.ns_pids(tree[1])) == len(clocks.ns_pids(tree[0]))
