"""The parent's clock against the candidate worker's: is what the worker says it measured
possible, given how long the parent waited for it?

The worker times each call itself (it must: device events and per-call samples live there),
but the worker is the candidate's process, and its timer can be rebound or raced. The parent
brackets every block with its own monotonic clock. A block's wall time is its calls plus a
per-call overhead the harness adds around them (refreshing inputs, flushing caches, the reply),
which the judge's blocks, run by the same harness on the same input sets, measure honestly. A
candidate block whose wall time the calls it reports cannot explain, by far and in every round,
is a clock that lies (or work done where the clock does not look): the parent's own figure is
then the one that counts, and the verdict says so.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

FAR = 5.0             # the parent's figure this many times the worker's ...
UNEXPLAINED_MS = 1.0  # ... and this much unexplained time per call, in every round ...
ROUNDS_TO_ACCUSE = 3  # ... of at least this many: one round is one block, and on a loaded
#                       machine one block can lose any amount of time to preemption (the
#                       Triton interpreter's single round of two calls was refused so in CI)


@dataclass
class Block:
    samples: list[float]      # the worker's per-call times, ms
    wall_ms: float            # the parent's clock around the whole block, ms


def outside_ms(judge: Block, candidate: Block, passes: int = 1) -> tuple[float, float]:
    """(the worker's mean per call, the parent's estimate per call) for one round.

    `passes`: how many times the harness runs each call in a block (2 on a GPU: the timed
    pass and the wall-clock pass)."""
    n_j, n_c = len(judge.samples), len(candidate.samples)
    overhead = max(0.0, judge.wall_ms - passes * sum(judge.samples)) / max(n_j, 1)
    said = sum(candidate.samples) / max(n_c, 1)
    unexplained = (candidate.wall_ms - passes * sum(candidate.samples)) / max(n_c, 1) - overhead
    return said, said + max(0.0, unexplained) / passes


def disagreement(rounds: list[tuple[Block, Block]], passes: int = 1) -> str:
    """Why the worker's clock cannot be believed, or "" when the parent's agrees (or too few
    rounds were timed to tell a lie from a preempted block)."""
    if len(rounds) < ROUNDS_TO_ACCUSE:
        return ""
    worst = []
    for judge, candidate in rounds:
        said, seen = outside_ms(judge, candidate, passes)
        if not (seen > FAR * said and seen - said > UNEXPLAINED_MS):
            return ""
        worst.append((said, seen))
    said, seen = max(worst, key=lambda p: p[1] / max(p[0], 1e-9))
    return (f"the worker's clock said {said:.4g} ms a call where the parent's clock saw "
            f"{seen:.4g} ms, in all {len(rounds)} rounds: its timer was replaced or its work "
            "ran where the timer does not look")


# --- who else had the CPU while timing ----------------------------------------------------------

def _ticks() -> float:
    return float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0


def process_cpu_s(pids: list[int]) -> float:
    """CPU time (user + system, s) of these processes, from /proc/PID/stat; 0 where gone."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])      # utime, stime
        except (OSError, IndexError, ValueError):
            pass
    return total / _ticks()


def threads_cpu_s(pids: list[int]) -> float:
    """CPU time of every thread of these processes, s, at nanosecond resolution (each task's
    schedstat): a block of a few milliseconds is below the 10 ms ticks of /proc/PID/stat, so
    its share of a spinning thread's time would read as none; ticks where there is no
    schedstat."""
    total, ticks = 0, []
    for pid, tid in threads_of(pids):
        if pid in ticks:
            continue
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            ticks.append(pid)
    return total / 1e9 + (process_cpu_s(ticks) if ticks else 0.0)


def threads_of(pids: list[int]):
    """(pid, tid) of every thread of these processes that still exist."""
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            yield pid, tid


def running(pids: list[int]) -> bool:
    """Whether a thread of these processes is on a core or waiting for one (state R)."""
    for pid, tid in threads_of(pids):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "R":
                    return True
        except (OSError, IndexError):
            pass
    return False


def preemptions(pids: list[int]) -> int:
    """Involuntary context switches of every thread of these processes."""
    total = 0
    for pid, tid in threads_of(pids):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                total += next((int(line.split()[1]) for line in f
                               if line.startswith("nonvoluntary_ctxt_switches")), 0)
        except (OSError, ValueError):
            pass
    return total


def machine_cpu_s() -> float | None:
    """CPU time every process took on the cores this process may use, since boot (their
    `cpuN` lines of /proc/stat, idle and iowait aside), s; None where there is no /proc."""
    try:
        mine = {f"cpu{n}" for n in os.sched_getaffinity(0)}
    except (AttributeError, OSError):
        mine = None
    total, found = 0, False
    try:
        with open("/proc/stat") as f:
            for line in f:
                name, *values = line.split()
                if not name.startswith("cpu") or name == "cpu" or (mine and name not in mine):
                    continue
                fields = [int(v) for v in values]
                total += sum(fields[:8]) - fields[3] - fields[4]
                found = True
    except (OSError, ValueError, IndexError):
        return None
    return total / _ticks() if found else None


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def serving(root: int, tree: list[int]) -> list[int]:
    """The processes of a candidate's (or the rival's) worker tree that are the worker itself:
    `root`, and where it runs in a PID namespace of its own, that namespace's init (PID 1)
    and the worker under it (PID 2, init's first child: zygote.become_init). Every other
    process of the tree was started by the candidate's code: its CPU is the candidate's."""
    depth = len(ns_pids(root)) or 1
    return [root] + [pid for pid in tree if pid != root and
                     ns_pids(pid)[depth:] in (["1"], ["2"])]


def ns_pids(pid: int) -> list[str]:
    """A process's pid in each PID namespace it is in, outermost first ([] where unknown)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((line.split()[1:] for line in f if line.startswith("NSpid:")), [])
    except OSError:
        return []


@dataclass
class CpuWatch:
    """CPU time around a timing: the machine's, ours (the parent, the judge's tree, and the
    candidate's and the rival's workers themselves), and the candidate worker's tree's, with
    its involuntary context switches. A process the candidate started is never ours: while
    it works it is competition (`others`), and its CPU counts in the worker's."""
    ours: list[int]           # the parent, the judge's tree, the workers (clocks.serving)
    worker: list[int]         # the candidate worker's tree, whatever the candidate started
    began: float = 0.0
    machine: float | None = None
    own: float = 0.0
    worker_cpu: float = 0.0
    switches: int = 0

    def start(self) -> "CpuWatch":
        self.began, self.machine = time.monotonic(), machine_cpu_s()
        self.own, self.worker_cpu = process_cpu_s(self.ours), process_cpu_s(self.worker)
        self.switches = preemptions(self.worker)
        return self

    def reading(self) -> dict:
        """What it has seen since start (it may be read again later):
        {"wall_s", "others_cores", "worker_cpu_s", "preempted", "load1", "cores"}."""
        wall = time.monotonic() - self.began
        machine = machine_cpu_s()
        own = process_cpu_s(self.ours) - self.own
        others = None
        if machine is not None and self.machine is not None and wall > 0:
            others = max(0.0, (machine - self.machine) - own) / wall
        try:
            load1 = os.getloadavg()[0]
        except (AttributeError, OSError):
            load1 = None
        return {"wall_s": wall, "others_cores": others,
                "worker_cpu_s": process_cpu_s(self.worker) - self.worker_cpu,
                "preempted": preemptions(self.worker) - self.switches, "load1": load1,
                "cores": usable_cores()}


# --- work done while another side is timed -----------------------------------------------------

SETTLE_S = 0.05          # the longest wait for the other workers to go idle before a block
SETTLE_POLL_S = 0.0002


class Outside:
    """CPU time a worker's process tree (the candidate's, the rival's) takes while another
    side's block is timed: a thread or a forked child left spinning then slows whoever is
    timed (eager, the rival, the candidate) and flatters its owner. Read around every block;
    the tree is read again each round (a child forked meanwhile is counted)."""

    def __init__(self, roots: dict[str, int]):
        self.roots = roots                  # {side: its worker's pid}
        self.trees: dict[str, list[int]] = {}
        self.cpu = {side: 0.0 for side in roots}     # CPU s during others' blocks
        self.wall = {side: 0.0 for side in roots}    # wall s of others' blocks

    def new_round(self, descendants) -> None:
        self.trees = {side: descendants(pid) for side, pid in self.roots.items()}

    def before(self, side: str) -> dict[str, float]:
        """`side`'s block is next: once every other worker is idle again, their CPU so far.
        A worker's reply reaches us before it is back waiting on its socket; on a busy
        machine that last stretch of its loop (tens of microseconds) is preempted and runs
        during the next block, where, beside eager's sub-millisecond blocks, it read as 0.03
        cores. A thread left spinning never settles, and the wait ends at SETTLE_S."""
        others = [tree for other, tree in self.trees.items() if other != side]
        deadline = time.monotonic() + SETTLE_S
        while any(running(tree) for tree in others) and time.monotonic() < deadline:
            time.sleep(SETTLE_POLL_S)
        return {other: threads_cpu_s(tree) for other, tree in self.trees.items()}

    def after(self, side: str, before: dict[str, float], wall_s: float) -> None:
        """`side`'s block has ended, `wall_s` long: every other worker's CPU meanwhile."""
        for other, tree in self.trees.items():
            if other != side:
                self.cpu[other] += max(0.0, threads_cpu_s(tree) - before[other])
                self.wall[other] += wall_s

    def cores(self, side: str) -> float | None:
        """The cores `side`'s tree kept busy on average while others were timed."""
        return self.cpu[side] / self.wall[side] if self.wall.get(side) else None
