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


# --- a run on a target that cannot run here is refused before anything is made (issues 30, 38)
SOFTMAX = Path(__file__).parent.parent / "kforge_nb" / "targets" / "examples" / "softmax.py"
RUN_FAST = ("--trials", "1", "--no-compile-baseline", "--iterations", "3")
# what this machine lacks, in the target's words, and what runs here instead
LACKS = {"cuda": "--target cuda cannot run here: no CUDA GPU on this machine.",
         "metal": "--target metal cannot run here: MPS is not available on this host. Metal "
                  "needs a Mac with Apple silicon and PyTorch's MPS backend."}
INSTEAD = ("Use --target cpp (runs and is timed here) or --target triton (interpreter — not a "
           "performance figure) on this machine.")
not_here = {"cuda": pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is here"),
            "metal": pytest.mark.skipif(torch.backends.mps.is_available(), reason="MPS is here")}


@pytest.mark.parametrize("target", [pytest.param(t, marks=not_here[t]) for t in LACKS])
def test_kforge_run_on_a_target_this_machine_lacks_says_so_once_and_makes_no_folder(
        kforge_main, tmp_path, target):
    done = kforge_main("run", str(SOFTMAX), "--target", target, "--provider", "builtin",
                      *RUN_FAST, "--out", str(tmp_path / "runs"))
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""                                # no table of no candidates
    assert done.stderr.splitlines() == [
        f"kforge: {LACKS[target]} The builtin agent does not write {target} kernels either (it "
        f"writes cpp and triton). {INSTEAD}"]
    assert not (tmp_path / "runs").exists()                 # no run folder for a run that cannot be


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="MPS is here")
def test_a_model_on_a_target_that_can_neither_run_nor_compile_here_is_refused_before_a_folder(
        api, tmp_path):
    from kforge_nb.session.config import run_defaults, session_from_args
    from kforge_nb.problem import Problem
    from kforge_nb.session.feasible import TargetError
    server = api([])
    args = run_defaults()
    args.target, args.provider, args.out = "metal", "anthropic", str(tmp_path / "runs")
    with pytest.raises(TargetError) as refused:
        session_from_args(Problem.from_file(SOFTMAX), args)
    assert str(refused.value) == (f"{LACKS['metal']} Its candidates could not even be compiled "
                                  f"here, so none could be judged. {INSTEAD}")
    assert server.requests == [] and not (tmp_path / "runs").exists()


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="MPS is here")
def test_a_session_made_through_the_api_meets_the_same_refusal_as_its_first_line(api, tmp_path):
    from kforge_nb.agents import AgentConfig
    from kforge_nb.problem import Problem
    from kforge_nb.session import Budget, Session
    server = api([])
    session = Session(Problem.from_file(SOFTMAX), "metal", AgentConfig(provider="anthropic"),
                      Budget(iterations=2), out=tmp_path)
    session.run()
    assert server.requests == [] and session.history == []
    assert session.finish_reason == f"bad input: {LACKS['metal']} Its candidates could not " \
        f"even be compiled here, so none could be judged. {INSTEAD}"
    assert "kept" not in session.finish_reason


@pytest.mark.parametrize("target", [pytest.param(t, marks=not_here[t]) for t in LACKS])
def test_a_kforge_cell_on_a_target_this_machine_lacks_is_one_sentence_and_no_view(
        ip, tmp_path, target):
    from IPython.core.error import UsageError
    ip.user_ns.pop("_kforge", None)
    with pytest.raises(UsageError) as refused:
        ip.run_cell_magic("kforge", f"--target {target} --provider builtin --out "
                          f"{tmp_path / 'runs'}", SOFTMAX.read_text())
    said = str(refused.value)
    assert said.startswith(f"%%kforge: {LACKS[target]}") and said.endswith(INSTEAD)
    assert said.count("cannot run here") == 1
    assert "_kforge" not in ip.user_ns and not (tmp_path / "runs").exists()


@needs_nvcc_without_gpu
def test_the_header_of_a_gpu_target_without_a_gpu_claims_no_compiled_source():
    from kforge_nb.session.feasible import where_it_runs
    from kforge_nb.targets import get_target
    said = where_it_runs(get_target("cuda"))
    assert said == "no CUDA GPU on this machine: run `kforge eval REF CAND --target cuda` on a " \
        "GPU host"
