"""clocks.Outside: the CPU a worker's process tree takes while another side is timed. A worker
that is still finishing its loop when its reply arrives is waited for; a thread left spinning is
counted (real processes, real /proc)."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from kforge_nb.evaluator.parent import clocks

# spins `first` CPU seconds when it starts, then either sleeps or spins on
WORKER = """
import sys, time
first, then = float(sys.argv[1]), sys.argv[2]
print("up", flush=True)
start = time.process_time()
while time.process_time() - start < first:
    pass
while then == "spin":
    pass
time.sleep(60)
"""


def start(first: float, then: str) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", WORKER, str(first), then],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "up\n"
    return child


@pytest.fixture
def patient(monkeypatch):
    # the wait is long enough for a busy machine to let the worker finish its burst
    monkeypatch.setattr(clocks, "SETTLE_S", 30.0)


def judge_block(outside: clocks.Outside, wall_s: float) -> None:
    before = outside.before("judge")
    time.sleep(wall_s)
    outside.after("judge", before, wall_s)


def test_a_worker_finishing_its_loop_is_waited_for_not_counted(patient):
    child = start(0.05, "sleep")
    try:
        outside = clocks.Outside({"candidate": child.pid})
        outside.new_round(lambda pid: [pid])
        judge_block(outside, 0.05)
        assert outside.cores("candidate") == 0.0
        assert not clocks.running([child.pid])
    finally:
        child.kill()


def test_a_thread_left_spinning_is_counted(monkeypatch):
    monkeypatch.setattr(clocks, "SETTLE_S", 0.01)
    child = start(0.0, "spin")
    try:
        outside = clocks.Outside({"candidate": child.pid})
        outside.new_round(lambda pid: [pid])
        assert clocks.running([child.pid])
        for _ in range(5):
            judge_block(outside, 0.05)
        # it never goes idle; on a busy machine it gets less than a whole core, never none
        assert outside.cores("candidate") > 0.05
    finally:
        child.kill()
