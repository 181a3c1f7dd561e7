"""Wrong answers are `mismatch`, with what a person needs to see where and how much."""
from kforge_nb.result import CORRECT, MISMATCH


def test_wrong_output_shape_is_mismatch_naming_both_shapes(judge):
    result = judge("relu", "cpp_wrong_shape")
    assert result.state == MISMATCH
    assert "shape (8, 63), expected (8, 64)" in result.message


def test_wrong_values_are_mismatch_with_error_size_fraction_and_worst_indices(judge):
    result = judge("relu", "cpp_leaky_relu")
    c = result.correctness
    assert result.state == MISMATCH
    assert 0.005 < c.max_abs_error < 0.1                  # 0.01 * |x| for negative x
    assert 0.3 < c.mismatch_fraction < 0.7                # about the negative half
    assert c.worst and all(len(w["index"]) == 2 for w in c.worst)
    assert all(w["expected"] == 0.0 and w["got"] < 0.0 for w in c.worst)
    assert c.error_map["kind"] == "2d" and c.error_map["shape"] == [8, 64]
    assert c.failed_check.startswith("trial 1 (seed ")


def test_zeros_for_near_zero_outputs_are_mismatch_by_the_relative_norm_guard(judge):
    result = judge("tiny_scale", "cpp_zeros_for_tiny_scale")
    c = result.correctness
    assert result.state == MISMATCH
    assert c.mismatch_fraction == 0.0          # every element is within atol of the answer...
    assert c.rel_norm_error == 1.0             # ...but all of the answer is missing
    assert "relative error norm" in result.message


def test_input_modified_in_place_is_mismatch_naming_the_input(judge):
    result = judge("relu", "cpp_relu_in_place")
    assert result.state == MISMATCH
    assert "input 0 was modified in place" in result.message


def test_hard_coded_batch_size_is_mismatch_on_the_extra_batch_size_trial(judge):
    result = judge("batch_center", "cpp_batch_center_hardcoded")
    assert result.state == MISMATCH
    assert "batch size changed to 5" in result.correctness.failed_check
    assert result.correctness.passed_trials == 5    # every trial at get_inputs()' batch passed


def test_hard_coded_batch_size_passes_when_the_shape_check_is_off(judge):
    result = judge("batch_center", "cpp_batch_center_hardcoded", shape_check=False,
                   measure=False)
    assert result.state == CORRECT


def test_an_answer_cached_from_the_first_call_is_mismatch_on_fresh_inputs(judge):
    result = judge("relu", "cpp_relu_cached_answer")
    assert result.state == MISMATCH
    assert result.correctness.passed_trials == 1
    assert result.correctness.failed_check.startswith("trial 2 (seed ")


def test_wrong_output_dtype_is_mismatch_naming_both_dtypes(judge):
    result = judge("relu", "cpp_relu_float64")
    assert result.state == MISMATCH
    assert "dtype torch.float64, expected torch.float32" in result.message


def test_small_errors_fail_strict_but_pass_a_declared_looser_precision_policy(judge):
    strict = judge("relu", "cpp_relu_off_by_1e3", measure=False)
    loose = judge("relu", "cpp_relu_off_by_1e3", measure=False, precision="tf32")
    assert strict.state == MISMATCH and strict.correctness.tolerance["policy"] == "strict"
    assert loose.state == CORRECT
    assert "tolerances loosened for the tf32 precision policy" in loose.message


def test_rounding_noise_around_a_true_zero_is_not_a_mismatch(tmp_path):
    """The mean of a normalised tensor is zero up to rounding: another summation order gives
    other noise (max error ~1e-7), which the relative-norm guard must not call a mismatch once
    the float64 answer (~1e-17) shows the reference is that noise too."""
    import torch
    from kforge_nb.evaluator.worker.correctness import compare_values
    from kforge_nb.result import Correctness
    torch.manual_seed(0)
    x = torch.randn(16, 4096)
    normed = (x - x.mean(1, keepdim=True)) / x.std(1, keepdim=True)
    reference = normed.mean(1)                               # ~1e-8: rounding noise
    other_order = normed.view(16, 64, 64).sum(2).sum(1) / 4096
    assert 0 < (reference - other_order).abs().max() < 1e-6
    x64 = x.double()
    exact = ((x64 - x64.mean(1, keepdim=True)) / x64.std(1, keepdim=True)).mean(1)
    ok, why = compare_values(reference, other_order, "strict", Correctness(), lambda: exact)
    assert ok, why
    zeros_for_small = compare_values(x[:, :8] * 1e-6, torch.zeros(16, 8), "strict", Correctness())
    assert not zeros_for_small[0] and "relative error norm" in zeros_for_small[1]
