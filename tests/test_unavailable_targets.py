"""A target that cannot run here is `unavailable`; the candidate is kept, and still compiled
where its compiler is present."""
import shutil
from pathlib import Path

import pytest
import torch

from kforge_nb.result import COMPILE_FAILURE, UNAVAILABLE
from tests.support.evaluator import candidate_source, line_of

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
