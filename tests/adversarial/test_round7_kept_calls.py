"""Round seven of the trust boundary: a kernel that learns, before its block is timed, which of
the block's calls the judge will check.

The judge picks the kept calls of a block by a secret random, but the candidate's worker is
told them with the block (it must copy a kept call's outputs the moment the call returns), so
they sit in the worker's memory, in harness.time_calls's locals, while the candidate's code
runs. A C++ ReLU that takes the GIL back inside its ctypes call, walks the interpreter's frames
up to the harness and reads `keep`, `first` and `k` computed only the kept calls and returned an
unwritten output from the others (candidates/r7_cpp_relu_reads_kept_calls.py): judged
`correct` with the time of calls that do no work. Now native source that reaches into the
interpreter or the loader (the Python C API; the loader's tables, which find a symbol without
dlsym; asm labels, which rename one) is refused by `native-interpreter-access`.
"""
from __future__ import annotations

import pytest

from kforge_nb.result import REJECTED
from tests.adversarial.support import assert_runs_here, assert_verdict
from tests.adversarial.test_exploits import Case, judge_case  # noqa: F401  (a fixture)

EXPLOITS = {
    "ReLU that reads the judge's kept calls from the harness's frame (Python C API), 16 MiB":
        Case("r6_relu_16mb", "r7_cpp_relu_reads_kept_calls", REJECTED,
             ["native-interpreter-access"], says=["line 21: PyGILState_Ensure"]),
}

# an honest kernel with inline asm (a compiler barrier) is no asm label: still correct
RUNS_HERE = {
    "an honest ReLU over 16 MiB with an inline asm barrier":
        ("r6_relu_16mb", "cpp_relu_asm_barrier", "cpp", "native x6"),
}


@pytest.mark.parametrize("name", list(EXPLOITS))
def test_round7_exploit_gets_its_verdict(name, judge_case):  # noqa: F811
    assert_verdict(name, EXPLOITS[name], judge_case(EXPLOITS[name]))


@pytest.mark.parametrize("name", list(RUNS_HERE))
def test_round7_runs_here_is_correct(name, options):
    assert_runs_here(RUNS_HERE[name], options)
