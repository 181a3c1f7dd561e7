"""Comparisons and masks in the builtin agent: eq, ne, lt, le, gt, ge (functions, methods and
operators), where, logical_and / or / not, masked_fill, written into the kernels in C++ and
Triton and judged `correct` by the real evaluator; a comparison forward returns is a bool
tensor, as torch's.
"""
from __future__ import annotations

import pytest

from kforge_nb.result import CORRECT
from tests.test_builtin import generate, judge, problem

PROBLEMS = {
    # a person's module: a softmax, then its top-1 mask (issue 36)
    "top1_mask_after_softmax": problem(
        "p = torch.softmax(x, dim=-1)\nreturn p * (p == p.amax(-1, keepdim=True))",
        "[torch.randn(64, 100)]"),
    "where_and_operators": problem(
        "keep = (x > 0.5) & (y <= 0.25) | (x != y)\n"
        "return torch.where(keep, x * 2.0, y) + (x < y) * 3.0 + (x >= 1.0)",
        "[torch.randn(33, 65), torch.randn(33, 65)]", signature="x, y"),
    "functions_and_methods": problem(
        "a = torch.logical_and(torch.gt(x, 0.0), x.lt(y))\n"
        "b = torch.logical_or(x.ge(y), torch.logical_not(torch.ne(x, 0.0)))\n"
        "return torch.where(a, x, 0.0) + b * y + torch.eq(x, y).float() + x.le(0.0).float()",
        "[torch.randn(20, 37), torch.randn(20, 37)]", signature="x, y"),
    "masked_fill_before_a_softmax": problem(
        "scores = x.masked_fill(x < -0.5, float('-inf'))\nreturn torch.softmax(scores, dim=-1)",
        "[torch.randn(16, 50)]"),
    "a_bool_mask_input": problem("return torch.where(m, x, -x).masked_fill(m, 0.5)",
                                 "[torch.randn(12, 30), torch.randn(12, 30) > 0]",
                                 signature="x, m"),
    "returns_a_bool": problem("return torch.abs(x) > 1.0", "[torch.randn(24, 40)]"),
}


@pytest.mark.slow     # a table: each problem judged on both targets
@pytest.mark.parametrize("target", ["cpp", "triton"])
@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_masks_are_computed_in_the_kernel_and_judged_correct(name, target, tmp_path):
    ref, generation = generate(PROBLEMS[name], target)
    assert generation.code is not None, generation.failure
    assert not {"eq", "ne", "lt", "le", "gt", "ge", "where", "masked_fill", "logical_and",
                "logical_or", "logical_not"} & set(generation.kept_ops), generation.kept_ops
    result = judge(ref, generation, target, tmp_path)
    assert result.state == CORRECT, result.message


def test_the_top1_mask_is_one_kernel_with_the_comparison_inside():
    _, generation = generate(PROBLEMS["top1_mask_after_softmax"], "cpp")
    assert generation.kept_ops == []
    assert generation.code.count('extern "C" void') == 1


def test_a_returned_comparison_is_stored_as_bool():
    _, cpp = generate(PROBLEMS["returns_a_bool"], "cpp")
    assert "bool* out" in cpp.code and "dtype=torch.bool" in cpp.code
    _, triton = generate(PROBLEMS["returns_a_bool"], "triton")
    assert "dtype=torch.bool" in triton.code


@pytest.mark.slow
def test_a_failure_that_repeats_alike_ends_the_run_on_its_reason(tmp_path):
    """The builtin agent says the same thing every round about a reference it cannot lower:
    the run ends after the second such round, on that reason, not on its iteration budget."""
    from kforge_nb.agents import AgentConfig
    from kforge_nb.evaluator import EvalOptions
    from kforge_nb.problem import Problem
    from kforge_nb.session import Budget, Session
    from kforge_nb.session.finish import NOTHING_TO_TRY

    ref = Problem.from_string(problem("return torch.linalg.inv(x)", "[torch.randn(8, 8)]"),
                              name="inverse")
    session = Session(ref, "cpp", AgentConfig(provider="builtin"), Budget(iterations=6),
                      EvalOptions(baselines=("eager",), out_dir=tmp_path, trials=2),
                      out=tmp_path)
    assert session.run() is None
    assert {a.iteration for a in session.history} == {0, 1}
    assert session.finish.kind == NOTHING_TO_TRY
    assert session.finish.text == ("the same generation failure two rounds running: builtin "
                                   "agent cannot lower: linalg.inv (no elementwise or reduction "
                                   "work left to put in a kernel)")
