"""Round eight of the trust boundary: a block's time is its fastest call, so that call is
checked.

On a contested CPU the fastest call of a block is the one the scheduler left alone (a kernel of
three OpenMP regions beside busy loops in other sessions read 0.14x eager at its p20 and 0.40x
at its fastest, idle truth 0.43x). On the CPU the worker keeps the fastest call so far of each
block (each new one in place of the last) and names it in its reply; the parent refuses a name
that is not the samples' first minimum, checks that call beside those drawn before the block,
and takes it as the block's time. A kernel that skips its work on some calls sets that time only
by being checked on one of them (candidates/r8_cpp_relu_skips_some_calls.py): `mismatch` at a
timed call.
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

