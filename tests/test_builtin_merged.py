"""Long rows read twice, not three times (triton/merged.py): softmax's max and sum in one
online pass, a norm's mean and variance in one Welford pass; judged `correct` by the real
evaluator under the Triton interpreter.

One problem, one judging: a softmax over 4 rows of 33000 (longer than a program keeps in
registers, and as many rows as the interpreter's programs, so not split), a log_softmax and a
variance (correction 1) over a middle dim (rows walked as lanes, 50 = 32 + a tail of 18), and
a LayerNorm over rows of mean 100 and spread 0.5 (a one-pass sum of squares would lose the
variance's digits there; Welford keeps them).
"""
from __future__ import annotations

import pytest

from kforge_nb.result import CORRECT
from tests.test_builtin import generate, judge, problem

pytestmark = pytest.mark.slow     # a Triton kernel over rows of 33000 under the CPU interpreter

MERGED = problem(
    "a = torch.softmax(x, dim=-1)\n"
    "b = torch.log_softmax(y, dim=1)\n"
    "c = torch.var(y, dim=1)\n"
    "d = self.ln(z)\n"
    "return a, b, c, d",
    "[torch.randn(4, 33000) * 3.0, torch.randn(2, 50, 40), torch.randn(4, 33000) * 0.5 + 100.0]",
    "self.ln = nn.LayerNorm(a0)", "[33000]", signature="x, y, z")


def test_long_rows_merge_their_passes_and_stay_correct(tmp_path):
    ref, generation = generate(MERGED, "triton")
    assert generation.code is not None, generation.failure
    merged = generation.code.count("in one read (online softmax")
    assert merged == 2, merged                      # softmax and log_softmax
    assert generation.code.count("in one read (Welford") == 2, generation.code   # var, LayerNorm
    result = judge(ref, generation, "triton", tmp_path)
    assert result.state == CORRECT, result.message
