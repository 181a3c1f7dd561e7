"""Guardrails reject a candidate before it runs, naming every rule that fired; a candidate that
patches the verdict's functions at run time is `rejected` as well, never `correct`."""
import ast

from kforge_nb.evaluator import evaluate
from kforge_nb.guardrails import Guardrails
from kforge_nb.problem import Problem
from kforge_nb.result import CORRECT, MISMATCH, REJECTED
from kforge_nb.targets.cpp import CppTarget
from tests.support.evaluator import EXAMPLES, PROBLEMS, candidate_source, line_of


def rules_fired(source: str, guardrails: Guardrails | None = None) -> list[str]:
    fired = (guardrails or Guardrails()).check(source, ast.parse(source), CppTarget.required)
    return [rule.name for rule, _ in fired]


def test_torch_softmax_in_forward_is_rejected_naming_torch_compute_in_forward(judge):
    result = judge("relu", "torch_softmax_in_forward")
    line = line_of(candidate_source("torch_softmax_in_forward"), "torch.softmax(")
    assert result.state == REJECTED
    assert result.rules == ["torch-compute-in-forward"]
    assert f"line {line}: torch.softmax()" in result.message


def test_triton_candidate_without_a_jit_kernel_is_rejected_naming_triton_kernel(judge):
    result = judge("tiny_add", "triton_without_jit", target="triton")
    assert result.state == REJECTED
    assert result.rules == ["triton-kernel"]
    assert "no @triton.jit kernel" in result.message


def test_user_ban_regex_rejects_a_matching_candidate(options):
    no_openmp = Guardrails(bans=[r"#pragma\s+omp"])
    result = evaluate(Problem.from_file(EXAMPLES / "softmax.py"),
                      (EXAMPLES / "cpp_softmax.py").read_text(), "cpp",
                      options(guardrails=no_openmp))
    assert result.state == REJECTED
    assert result.rules == [r"user-ban:#pragma\s+omp"]
    assert "banned by the user" in result.message and "#pragma omp" in result.message


def test_calling_a_loaded_kernel_named_after_a_torch_op_is_not_torch_compute():
    assert "kernels.relu(x, y, x.numel())" in candidate_source("cpp_relu")
    assert rules_fired(candidate_source("cpp_relu")) == []


def test_a_kernel_name_rebound_to_torch_passes_the_static_pass_and_is_caught_running(options):
    """Names are not the judge: the static pass lets it through, the run-time audit sees
    aten.relu dispatched from forward and names the line."""
    source = candidate_source("cpp_relu").replace("kernels.relu(x, y, x.numel())",
                                                  "kernels = torch\n        y = kernels.relu(x)")
    assert rules_fired(source) == []
    result = evaluate(Problem.from_file(PROBLEMS / "relu.py"), source, "cpp", options())
    assert result.state == REJECTED and result.rules == ["torch-compute-at-runtime"]
    assert f"aten.relu at line {line_of(source, 'kernels.relu(x)')}" in result.message


def test_tampering_candidate_is_rejected_by_the_static_patching_rule(judge):
    result = judge("relu", "cpp_tampering_wrong_values")
    assert result.state == REJECTED
    assert result.rules == ["patching-or-introspection"]
    for name in ("torch.allclose", "torch.testing.assert_close", "time.perf_counter"):
        assert f"assigns {name}" in result.message


def test_tampering_candidate_that_runs_is_rejected_by_the_integrity_check(judge):
    result = judge("relu", "cpp_tampering_wrong_values", guardrails=Guardrails(defaults=False))
    assert result.state == REJECTED                   # not correct, not even mismatch
    assert result.rules == ["tampering"]
    for name in ("torch.allclose", "torch.testing.assert_close", "time.perf_counter"):
        assert name in result.message
    assert "its own outcome was mismatch" in result.message   # the patches fooled nothing
    assert result.correctness.mismatch_fraction > 0.3


def test_patching_a_clock_after_the_trials_is_rejected_not_correct(judge):
    result = judge("relu", "cpp_tampering_timer_only", guardrails=Guardrails(defaults=False))
    assert result.state == REJECTED
    assert result.rules == ["tampering"]
    assert "time.perf_counter_ns" in result.message
    assert "its own outcome was correct" in result.message


def test_patching_the_evaluators_own_comparison_changes_no_verdict(judge):
    result = judge("relu", "cpp_patches_the_evaluator", guardrails=Guardrails(defaults=False))
    assert result.state == MISMATCH
    assert result.correctness.mismatch_fraction > 0.3


def test_a_tampering_candidate_does_not_leak_into_the_next_evaluation(judge):
    off = Guardrails(defaults=False)
    assert judge("relu", "cpp_tampering_wrong_values", guardrails=off).rules == ["tampering"]
    result = judge("relu", "cpp_relu", guardrails=off)
    assert result.state == CORRECT and result.rules == []


def test_a_patch_present_only_while_timed_is_rejected_not_correct(judge):
    result = judge("relu", "cpp_tampering_only_while_timed",
                   guardrails=Guardrails(defaults=False))
    assert result.state == REJECTED
    assert result.rules == ["tampering"]
    assert "time.perf_counter_ns" in result.message
