"""Nsight Compute's counters join the analyst's text summary where `ncu` can profile: the
parser on ncu's own CSV, the child that ncu starts (run here for real, without ncu: the CPU
has no counters), and the whole path on a CUDA GPU with ncu on the PATH (the lent H100:
docs/results.md)."""
from __future__ import annotations

import shutil

import pytest
import torch

from kforge_nb.agents import AgentConfig
from kforge_nb.agents.feedback import profile_summary, summary_text
from kforge_nb.evaluator import evaluate
from kforge_nb.evaluator.worker import harness, nsight
from kforge_nb.executors import InProcess
from kforge_nb.problem import Problem
from kforge_nb.session import Budget, Session
from tests.support.evaluator import EXAMPLES, profiled_result
from tests.test_session_anthropic import FASTER, GOOD, RECOMMENDATION, answer, api  # noqa: F401

PROBLEM_SOFTMAX = Problem.from_file(EXAMPLES / "softmax.py")

NCU_CSV = '''==PROF== Connected to process 4242 (/usr/bin/python3.11)
==PROF== Profiling "softmax_kernel" - 0: 0%....50%....100% - 9 passes
==PROF== Disconnected from process 4242
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","dram__throughput.avg.pct_of_peak_sustained_elapsed","launch__registers_per_thread","sm__throughput.avg.pct_of_peak_sustained_elapsed","sm__warps_active.avg.pct_of_peak_sustained_active"
"","","","","","","","","","","","%","register/thread","%","%"
"0","4242","python3.11","127.0.0.1","softmax_kernel","1","7","(256, 1, 1)","(64, 1, 1)","0","9.0","78.41","32","12.06","45.87"
"1","4242","python3.11","127.0.0.1","fill_kernel","1","7","(128, 1, 1)","(1,024, 1, 1)","0","9.0","n/a","16","3.5","10.2"
"2","4242","python3.11","127.0.0.1","softmax_kernel","1","7","(256, 1, 1)","(64, 1, 1)","0","9.0","80.41","32","14.06","45.87"
'''


def test_ncu_metrics_join_the_text_summary(monkeypatch):
    kernels = nsight.parse_csv(NCU_CSV)
    assert [k["name"] for k in kernels] == ["softmax_kernel", "fill_kernel", "softmax_kernel"]
    assert kernels[0]["dram__throughput.avg.pct_of_peak_sustained_elapsed"] == 78.41
    assert kernels[1]["dram__throughput.avg.pct_of_peak_sustained_elapsed"] is None
    result = profiled_result()
    assert "Nsight" not in summary_text(profile_summary(result))
    result.profile["ncu_csv"] = NCU_CSV
    text = summary_text(profile_summary(result))
    # a kernel launched twice is one line: the mean of its launches
    assert "  - softmax_kernel (2 launches): compute 13% of peak, DRAM 79% of peak, " \
           "occupancy 46%, 32 registers/thread" in text
    assert "  - fill_kernel: compute 4% of peak, occupancy 10%, 16 registers/thread" in text
    del result.profile["ncu_csv"]
    result.profile["ncu_error"] = "==ERROR== ERR_NVGPUCTRPERM - no permission"
    assert "Nsight Compute: no counters (==ERROR== ERR_NVGPUCTRPERM - no permission)" in \
        summary_text(profile_summary(result))


def test_ncu_runs_only_for_gpu_targets_and_only_where_it_is_installed(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    assert nsight.command("cuda") is None
    monkeypatch.setattr("shutil.which", lambda name: f"/usr/local/cuda/bin/{name}")
    assert nsight.command("cpp") is None
    prefix = nsight.command("triton")
    assert prefix[:5] == ["ncu", "--csv", "--page", "raw", "--metrics"]
    # the clocks the timing saw; only the call between cudaProfilerStart and Stop
    assert "--clock-control" in prefix and "--profile-from-start" in prefix


# --- the child ncu starts ---------------------------------------------------------------------

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)


def get_inputs():
    return [torch.randn(2, 4)]


def get_init_inputs():
    return []
'''

CANDIDATE = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        with open("calls.txt", "a") as f:          # the child's folder: the evaluation's
            f.write(f"{self.lin.weight.sum().item():g} {tuple(x.shape)}\\n")
        return self.lin(x)
'''


def child_job(tmp_path, source: str) -> dict:
    weights = tmp_path / "weights.pt"
    harness.save_tensors(weights, {"lin.weight": torch.ones(4, 4), "lin.bias": torch.zeros(4)})
    return {"source": source, "filename": str(tmp_path / "candidate.py"),
            "problem_source": PROBLEM, "problem_label": "linear.py", "device": "cpu",
            "init_seed": 0, "precision": "strict", "env": {}, "weights": str(weights),
            "trial": {"seed": 3000, "distribution": "given"}}


def test_the_child_rebuilds_the_candidate_with_the_judged_weights_and_runs_it(tmp_path):
    # no ncu prefix: the child alone, in a real subprocess; ncu would profile its third call
    reply = nsight.profile([], child_job(tmp_path, CANDIDATE), tmp_path, timeout_s=120)
    assert reply == {"ncu_error": "no kernels profiled (exit 0)"}
    # warm-up twice, then the profiled call; the judged weights (ones), not a fresh init
    assert (tmp_path / "calls.txt").read_text().splitlines() == ["16 (2, 4)"] * 3


def test_a_child_that_fails_says_why(tmp_path):
    broken = CANDIDATE.replace("return self.lin(x)", "raise RuntimeError('boom in forward')")
    reply = nsight.profile([], child_job(tmp_path, broken), tmp_path, timeout_s=120)
    assert reply == {"ncu_error": "RuntimeError: boom in forward"}


# --- which candidates a session asks counters for ------------------------------------------

class Judged(InProcess):
    """Judges for real, and keeps the options each candidate was judged with."""

    def __init__(self):
        self.options: dict[str, object] = {}

    def evaluate(self, problem, code, target, options, folder):
        self.options[str(folder)] = options
        return super().evaluate(problem, code, target, options, folder)


def judged_with(tmp_path, agents: AgentConfig, options) -> tuple[Session, dict]:
    executor = Judged()
    session = Session(PROBLEM_SOFTMAX, "cpp", agents,
                      Budget(iterations=2, samples=1, confirm=2, patience=None),
                      options(), out=tmp_path, executor=executor)
    session.run()
    assert len(session.history) == 2 and session.history[1].parent == session.history[0].id
    assert all(a.result.state == "correct" for a in session.history)
    by_attempt = {a.id: executor.options[str(session.folder / f"iter-{a.iteration:02d}" /
                                             f"sample-{a.sample}")] for a in session.history}
    finals = [o for folder, o in executor.options.items() if "/duels/" in folder]
    assert finals and not any(o.ncu for o in finals)          # the final judging: never
    return session, by_attempt


@pytest.mark.slow     # runs a session
def test_a_session_asks_counters_only_of_candidates_that_beat_their_parent(
        api, options, tmp_path):  # noqa: F811
    # they cost ~13 s a candidate on an H100 and the analyst reads a lineage's best: the
    # first candidate always, a child only if it is at least as fast as its parent
    pytest.importorskip("anthropic")      # without it the session falls back to the builtin
    api([answer(GOOD), RECOMMENDATION, answer(FASTER)])
    session, judged = judged_with(tmp_path, AgentConfig(provider="anthropic"), options)
    first, child = session.history
    assert judged[first.id].ncu and judged[first.id].ncu_over is None
    assert judged[child.id].ncu and \
        judged[child.id].ncu_over == first.result.timing.speedup_vs_eager


@pytest.mark.slow     # runs sessions
def test_no_counters_for_the_builtin_analyst_or_under_no_ncu(api, options, tmp_path):  # noqa: F811
    _, judged = judged_with(tmp_path / "builtin", AgentConfig(provider="builtin"), options)
    assert not any(o.ncu for o in judged.values())             # its rules never read them
    pytest.importorskip("anthropic")
    api([answer(GOOD), RECOMMENDATION, answer(FASTER)])
    _, judged = judged_with(tmp_path / "off", AgentConfig(provider="anthropic", ncu=False),
                            options)
    assert not any(o.ncu for o in judged.values())


# --- on a CUDA GPU with ncu -------------------------------------------------------------------

UNREADABLE = ("ERR_NVGPUCTRPERM", "LibraryNotLoaded")    # a host that hides the counters


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available() or not shutil.which("ncu"),
                    reason="needs a CUDA GPU and ncu on the PATH")
def test_a_triton_candidate_gets_its_counters_in_the_sandbox(options):
    softmax, triton_softmax = PROBLEM_SOFTMAX, (EXAMPLES / "triton_softmax.py").read_text()
    result = evaluate(softmax, triton_softmax, "triton", options(ncu=True))
    assert result.state == "correct" and result.sandbox.get("enabled")
    error = result.profile.get("ncu_error", "")
    if any(word in error for word in UNREADABLE):
        pytest.skip(f"this GPU host does not let ncu read counters: {error}")
    kernels = nsight.parse_csv(result.profile["ncu_csv"])
    assert kernels and all("softmax" in k["name"] for k in kernels), kernels
    text = summary_text(profile_summary(result))
    assert "Nsight Compute, per kernel:" in text and "registers/thread" in text
    assert "ncu_csv" not in evaluate(softmax, triton_softmax, "triton", options()).profile
    # a session's child slower than its parent: no counters (the analyst won't read it next)
    beaten = evaluate(softmax, triton_softmax, "triton", options(ncu=True, ncu_over=1e6))
    assert beaten.state == "correct" and "ncu_csv" not in beaten.profile
