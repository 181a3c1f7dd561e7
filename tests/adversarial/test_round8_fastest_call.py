"""Round eight of the trust boundary: a block's time is its fastest call, so that call is
checked.

On a contested CPU the fastest call of a block is the one the scheduler left alone (a kernel of
several OpenMP regions beside busy loops in other sessions read 0.14x eager at its p20 and
0.40x at its fastest, idle truth 0.43x). Where every call's outputs of a CPU block fit to be
kept, the worker copies each as it returns, the block's time is its fastest call, and the
judge draws which calls to check after the block, the fastest always among them. A kernel
that skips its work on some calls sets that time only by being checked on one of them
(candidates/r8_cpp_relu_skips_some_calls.py): `mismatch` at a timed call.
"""
from __future__ import annotations

import pytest

from kforge_nb.result import MISMATCH
from tests.adversarial.support import assert_verdict
from tests.adversarial.test_exploits import Case, judge_case  # noqa: F401  (a fixture)

EXPLOITS = {
    "ReLU that returns an unwritten output on every third timed call, 16 MiB":
        Case("r6_relu_16mb", "r8_cpp_relu_skips_some_calls", MISMATCH, [],
             says=["timed call"]),
}


@pytest.mark.parametrize("name", list(EXPLOITS))
def test_round8_exploit_gets_its_verdict(name, judge_case):  # noqa: F811
    assert_verdict(name, EXPLOITS[name], judge_case(EXPLOITS[name]))

