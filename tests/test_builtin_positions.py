"""Integer positions in the builtin agent (issue 36): torch.arange and what a module computes
from it (a sliding window's distance, compared and joined with `|`), `~` on a bool mask, and
a mask's count (torch's int64) are kernel work in C++ and Triton, judged `correct` by the real
evaluator; and where float32 could not hold the positions exactly they stay in torch.
"""
from __future__ import annotations

import pytest

from kforge_nb.result import CORRECT
from tests.test_builtin import generate, judge, problem

PROBLEMS = {
    # Mistral's sliding window, as benchmarks/realworld/sliding_window_attention.py writes it
    "sliding_window_mask": problem(
        "scores = x / 4.0\n"
        "i = torch.arange(x.shape[-1], device=x.device)\n"
        "distance = i[:, None] - i[None, :]\n"
        "hidden = (distance < 0) | (distance >= 5)\n"
        "return torch.softmax(scores.masked_fill(hidden, float('-inf')), dim=-1)",
        "[torch.randn(2, 3, 24, 24)]"),
    "inverted_bool_mask": problem(
        "return x.masked_fill(~m, 0.0) + torch.where(~(x > 0.5) & m, 1.0, x)",
        "[torch.randn(12, 30), torch.randn(12, 30) > 0]", signature="x, m"),
    # torch sums a bool tensor to int64: the kernel stores the count so
    "count_of_a_mask": problem("return (x > 0.25).sum(dim=-1)", "[torch.randn(16, 70)]"),
    # returned positions are int64, as torch's; the window's edge is a number of positions
    "returned_distances": problem(
        "i = torch.arange(3, 3 + x.shape[-1], device=x.device)\n"
        "return torch.where(x > 0, i - 7, i * 2)",
        "[torch.randn(9, 40)]"),
}
TORCH_INTEGER_OPS = {"arange", "sub", "lt", "ge", "bitwise_or", "bitwise_not", "bitwise_and",
                     "sum", "where", "masked_fill", "mul"}


@pytest.mark.slow     # a table: each problem judged on both targets
@pytest.mark.parametrize("target", ["cpp", "triton"])
@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_positions_are_computed_in_the_kernel_and_judged_correct(name, target, tmp_path):
    ref, generation = generate(PROBLEMS[name], target)
    assert generation.code is not None, generation.failure
    assert not TORCH_INTEGER_OPS & set(generation.kept_ops), generation.kept_ops
    result = judge(ref, generation, target, tmp_path)
    assert result.state == CORRECT, result.message


def test_the_sliding_window_is_one_kernel_with_the_positions_inside():
    _, generation = generate(PROBLEMS["sliding_window_mask"], "cpp")
    assert generation.kept_ops == []
    assert generation.code.count('extern "C" void') == 1
    assert "dtype=torch.float32)" in generation.code    # the positions vector, made on the host


def test_a_count_and_positions_forward_returns_are_int64():
    for name in ("count_of_a_mask", "returned_distances"):
        _, cpp = generate(PROBLEMS[name], "cpp")
        assert "int64_t* out" in cpp.code and "dtype=torch.int64" in cpp.code, name
        _, triton = generate(PROBLEMS[name], "triton")
        assert "dtype=torch.int64" in triton.code, name


def test_positions_float32_cannot_hold_exactly_stay_in_torch():
    """2**24 + 1 is not a float32: a comparison with it stays a torch op (and the guardrail
    then says so), never a kernel that compares a rounded number."""
    _, generation = generate(problem(
        "i = torch.arange(x.shape[-1], device=x.device)\n"
        "return x.masked_fill(i * 1000000 > 16777217, 0.0)", "[torch.randn(4, 40)]"), "cpp")
    assert "operator *" in generation.code.split('"""')[1], generation.code[:400]
