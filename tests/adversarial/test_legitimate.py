"""Legitimate kernels written the ways models write them: none may be `rejected`. Each ends
`correct` where its target runs here, and `unavailable` where it cannot (Metal off a Mac, CUDA
without a GPU) - never `rejected` by a name it happens to share with a torch op."""
from __future__ import annotations

import ast

import pytest
import torch

from kforge_nb.evaluator import evaluate
from kforge_nb.guardrails import Guardrails
from kforge_nb.result import CORRECT, REJECTED, UNAVAILABLE
from kforge_nb.targets import get_target
from tests.adversarial.support import problem, source

# name -> (problem, candidate, target, kernel launches over the 6 trials)
RUNS_HERE = {
    "triton launch in a helper object stored as self.softmax":
        ("softmax_rows", "triton_softmax_helper_object", "triton", "triton x6"),
    "library stored as self.softmax; kernels named amax/exp/div":
        ("softmax_rows", "cpp_softmax_op_named_attributes", "cpp", "native x18"),
    "cpp.load inside forward on the first call":
        ("softmax_rows", "cpp_softmax_lazy_build", "cpp", "native x6"),
    "workspace preallocated in __init__, reused every call":
        ("softmax_rows", "cpp_softmax_workspace", "cpp", "native x6"),
    "two kernels per forward (row max, then normalise)":
        ("softmax_rows", "cpp_softmax_two_kernels", "cpp", "native x12"),
    "the shipped cpp example":
        ("softmax", "cpp_softmax", "cpp", "native x6"),
    "the shipped triton example":
        ("softmax", "triton_softmax", "triton", "triton x6"),
    # the red team's false rejections: each is read as code now, not as text
    "C++ asks std::thread::hardware_concurrency() (a query, no thread)":
        ("relu", "cpp_relu_hardware_concurrency", "cpp", "native x6"),
    'several functions in one extern "C" { ... } block':
        ("softmax_rows", "cpp_softmax_extern_c_block", "cpp", "native x12"),
    "std::int64_t / std::size_t / const float* __restrict__ parameters":
        ("relu", "cpp_relu_std_types", "cpp", "native x6"),
    "comments, strings and docstrings that mention fast-math, autocast, float16":
        ("relu", "cpp_relu_comments_mention_fast_math", "cpp", "native x6"),
    "allow_tf32 = False (stricter than the policy)":
        ("relu", "cpp_relu_strict_tf32", "cpp", "native x6"),
    "@triton.autotune under the CPU interpreter":
        ("relu", "triton_relu_autotune", "triton", "triton x6"),
}


def run(problem_name: str, candidate: str, target: str, options, **overrides):
    return evaluate(problem(problem_name), source(candidate), target, options(**overrides))


@pytest.mark.parametrize("name", list(RUNS_HERE))
def test_legitimate_kernel_is_correct(name, options):
    problem_name, candidate, target, launches = RUNS_HERE[name]
    result = run(problem_name, candidate, target, options)
    assert result.state != REJECTED, f"{name}: rejected: {result.message}"
    assert result.state == CORRECT, result.message
    assert result.rules == []
    assert f"kernels launched: {launches}" in result.message
    assert result.timing.rounds >= 1 and result.timing.input_sets >= 2


@pytest.mark.parametrize("candidate", [c for _, c, _, _ in RUNS_HERE.values()]
                         + ["metal_softmax_lazy_shader", "metal_softmax", "cuda_softmax",
                            "cuda_relu_current_stream"])
def test_the_static_pass_lets_every_legitimate_form_through(candidate):
    """The name-based first pass fires on none of them: the run-time audit decides."""
    text = source(candidate)
    target = get_target("triton" if "triton" in candidate else "metal" if "metal" in candidate
                        else "cuda" if "cuda" in candidate else "cpp")
    assert Guardrails().check(text, ast.parse(text), target.required) == []


def test_metal_shader_compiled_inside_forward_is_unavailable_not_rejected(options):
    if torch.backends.mps.is_available():
        pytest.skip("this host runs Metal: the shader is judged for real")
    result = run("softmax_rows", "metal_softmax_lazy_shader", "metal", options)
    assert result.state == UNAVAILABLE, result.message
    assert result.rules == []
    assert "needs a Mac" in result.message


def test_cuda_example_is_not_rejected(options):
    result = run("softmax", "cuda_softmax", "cuda", options)
    assert result.state != REJECTED, result.message
    if torch.cuda.is_available():
        assert result.state == CORRECT, result.message
    else:
        assert result.state == UNAVAILABLE, result.message
        assert "no CUDA GPU" in result.message


def test_launch_on_the_current_stream_is_not_an_extra_stream(options):
    """`with torch.cuda.stream(torch.cuda.current_stream()):` switches to the stream torch is
    on already; the `extern "C" { }` launcher takes it as its cudaStream_t."""
    result = run("relu", "cuda_relu_current_stream", "cuda", options)
    assert result.state != REJECTED, result.message
    assert result.rules == []
    if torch.cuda.is_available():
        assert result.state == CORRECT, result.message
    else:
        assert result.state == UNAVAILABLE, result.message
        assert "no CUDA GPU" in result.message


def test_torch_compute_is_correct_when_allowed_by_name(options):
    """`--allow _softmax`: the submodule's softmax is accepted deliberately."""
    result = run("softmax_rows", "cpp_softmax_nn_module", "cpp", options,
                 guardrails=Guardrails(allow=["_softmax"]))
    assert result.state == CORRECT, result.message


def test_allow_star_accepts_torch_compute_with_no_kernel_at_all(options):
    """`--allow '*'` (baselines, memory sweeps): torch may compute, no kernel is required."""
    result = run("softmax_rows", "torch_softmax_allowed", "cpp", options,
                 guardrails=Guardrails(allow=["*"]))
    assert result.state == CORRECT, result.message
