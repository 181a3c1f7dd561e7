"""torch.compile's start-up is paid once per fork server, not once per judging (issue 38):
every judging of a run times the reference's torch.compile beside the candidate, in a judge
forked from the fork server; the server warms torch.compile before the first such judge, so the
judges after it inherit Inductor's imports, its source hashes and the CPU's vector ISA probe.
Real processes: the fork server's own function in a fresh interpreter, and a real judging."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kforge_nb.evaluator import EvalOptions, evaluate
from kforge_nb.problem import Problem
from kforge_nb.result import CORRECT

REPO = Path(__file__).parent.parent
EXAMPLES = REPO / "kforge_nb" / "targets" / "examples"
pytestmark = pytest.mark.slow     # torch.compile warmed in a fresh fork server, then timed

WARM = r"""
import json, os, threading
from kforge_nb.evaluator.worker import entry                # what the fork server imports
from kforge_nb.evaluator.wire import zygote
from torch._inductor import cpu_vec_isa
threads = len(os.listdir("/proc/self/task"))
zygote.warm_compile()
probed = cpu_vec_isa.valid_vec_isa_list.cache_info().currsize
zygote.warm_compile()                                       # once: the second call is free
pid = os.fork()
if pid == 0:                                                # a judge forked after it
    os._exit(0 if cpu_vec_isa.valid_vec_isa_list.cache_info().currsize == 1 else 3)
_, status = os.waitpid(pid, 0)
print(json.dumps({"threads_before": threads, "threads_after": len(os.listdir("/proc/self/task")),
                  "python_threads": threading.active_count(), "probed": probed,
                  "child": os.waitstatus_to_exitcode(status)}))
"""


def test_the_fork_server_warms_torch_compile_once_and_stays_safe_to_fork():
    done = subprocess.run([sys.executable, "-c", WARM], capture_output=True, text=True,
                          timeout=900, cwd=REPO)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.splitlines()[-1])
    assert said["probed"] == 1 and said["child"] == 0      # the judge inherits the probe
    # no thread (a compile pool's) left behind to deadlock a forked child
    assert said["threads_after"] <= said["threads_before"] and said["python_threads"] == 1


def test_judgings_after_the_warm_up_still_time_torch_compile_beside_the_candidate(tmp_path):
    problem = Problem.from_file(EXAMPLES / "softmax.py")
    code = (EXAMPLES / "cpp_softmax.py").read_text()
    for run in ("first", "second"):
        result = evaluate(problem, code, "cpp", EvalOptions(
            baselines=("eager", "compile"), out_dir=tmp_path / run, trials=1,
            timing_budget_s=0.2))
        assert result.state == CORRECT, result.message
        assert result.timing.compile_ms and result.timing.speedup_vs_compile, run
