"""Tolerances: another summation order passes; a real error of the same kind does not."""


def test_another_summation_order_on_large_sums_is_correct(judge):
    result = judge("row_sum_wide", "row_sum_reversed")
    assert result.state == "correct", result.message
    assert result.correctness.tolerance["atol_scaled"] > result.correctness.tolerance["atol"]


def test_a_dropped_term_in_a_large_sum_is_a_mismatch(judge):
    result = judge("row_sum_wide", "row_sum_off_by_a_bit")
    assert result.state == "mismatch", result.message
