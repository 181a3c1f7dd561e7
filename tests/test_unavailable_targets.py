"""A target that cannot run here is `unavailable`; the candidate is kept, and still compiled
where its compiler is present."""
import shutil
from pathlib import Path

import pytest
import torch

from kforge_nb.result import COMPILE_FAILURE, UNAVAILABLE
from tests.support.evaluator import candidate_source, line_of
from tests.test_magic import api, ip  # noqa: F401  (fixtures)

needs_nvcc_without_gpu = pytest.mark.skipif(
    shutil.which("nvcc") is None or torch.cuda.is_available(),
    reason="needs nvcc on a host without a CUDA GPU")


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="MPS is here")
def test_metal_off_a_mac_is_unavailable_and_keeps_the_candidate(judge):
    result = judge("relu", "metal_softmax", target="metal")
    assert result.state == UNAVAILABLE
    kept = Path(result.artifacts) / "candidate.py"
    assert kept.read_text() == candidate_source("metal_softmax")
    assert "Mac" in result.message
    assert "kforge eval REFERENCE.py candidate.py --target metal" in result.message


@needs_nvcc_without_gpu
def test_cuda_compile_error_without_a_gpu_is_compile_failure_with_nvcc_message(judge):
    source = candidate_source("cuda_compile_error")
    result = judge("relu", "cuda_compile_error", target="cuda")
    assert result.state == COMPILE_FAILURE
    assert 'has no member "w"' in result.message       # nvcc's own words
    assert result.error["line"] == line_of(source, "+ threadIdx.w")
    assert "kernel.cu(" in result.error["log"]


@needs_nvcc_without_gpu
def test_cuda_candidate_that_builds_without_a_gpu_is_unavailable_saying_no_gpu(judge):
    result = judge("relu", "cuda_relu", target="cuda")
    assert result.state == UNAVAILABLE
    assert "no CUDA GPU" in result.message
    assert "compiled with nvcc here" in result.message


# --- a run on a target it cannot work on ends at once (issue 30) -----------------------------
SOFTMAX = Path(__file__).parent.parent / "kforge_nb" / "targets" / "examples" / "softmax.py"
RUN_FAST = ("--trials", "1", "--no-compile-baseline", "--iterations", "3")


@pytest.mark.parametrize("target", ["metal", "cuda"])
def test_the_builtin_agent_on_a_target_it_cannot_write_fails_at_once(kforge_cli, tmp_path,
                                                                      target):
    done = kforge_cli("run", str(SOFTMAX), "--target", target, "--provider", "builtin",
                      *RUN_FAST, "--out", str(tmp_path / "runs"))
    assert done.returncode == 2, done.stderr
    first = done.stderr.splitlines()[0]
    assert first == (f"note: --target {target}: the builtin agent cannot write {target} kernels "
                     "(it writes cpp and triton kernels). Choose --target cpp or triton, or a "
                     f"model provider (--provider anthropic or openai) to write {target} "
                     "kernels.")
    assert "pass" not in done.stderr and "[0" not in done.stderr      # no iteration began
    assert "kept" not in done.stderr + done.stdout and "nvcc" not in done.stderr + done.stdout
    events = next((tmp_path / "runs").glob("*/events.jsonl")).read_text()
    assert '"candidate_generated"' not in events and '"started"' not in events


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="MPS is here")
def test_a_model_on_a_target_that_can_neither_run_nor_compile_here_is_not_asked(api, tmp_path):
    from kforge_nb.agents import AgentConfig
    from kforge_nb.problem import Problem
    from kforge_nb.session import Budget, Session
    server = api([])
    session = Session(Problem.from_file(SOFTMAX), "metal", AgentConfig(provider="anthropic"),
                      Budget(iterations=2), out=tmp_path)
    session.run()
    assert server.requests == [] and session.history == []
    assert session.finish_reason.startswith(
        "bad input: --target metal: its candidates can be neither run nor compiled on this "
        "machine, so none could be judged: MPS is not available on this host. Metal needs a "
        "Mac with Apple silicon and PyTorch's MPS backend.")
    assert "kept" not in session.finish_reason


def test_the_notebook_header_says_why_at_once(ip, tmp_path):
    from kforge_nb.ui import fallback
    from kforge_nb.ui.report import run_record
    ip.run_cell_magic("kforge", f"--target metal --provider builtin --block --out {tmp_path}",
                      SOFTMAX.read_text())
    record = run_record(ip.user_ns["_kforge"])
    assert record["state"] == "finished" and record["history"] == [] and not record["best"]
    header = fallback.to_text(record).splitlines()[0]
    assert "finished: bad input: --target metal: the builtin agent cannot write metal" in header
    assert "kept" not in header and "nvcc" not in header


@needs_nvcc_without_gpu
def test_the_header_of_a_gpu_target_without_a_gpu_claims_no_compiled_source():
    from kforge_nb.session.feasible import where_it_runs
    from kforge_nb.targets import get_target
    said = where_it_runs(get_target("cuda"))
    assert said == "no CUDA GPU on this machine: run `kforge eval REF CAND --target cuda` on a " \
        "GPU host"
