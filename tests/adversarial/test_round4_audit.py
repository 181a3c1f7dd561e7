"""Trust, round four (issue 37, items 4 and 6): the audit reads what ran, not names; glue is glue.

The red team's exploits each end `rejected` with the rule that should catch them, the message
naming the op (or the name, or the pragma) and the candidate's line; the legitimate wrappers
they found refused each end `correct`. Every row is a real candidate judged by the real
evaluator; the static rows also run the preprocessor (g++ -E) for real. Below the tables, the
parts one at a time: what a name is bound to, the source after the preprocessor, which casts
compute, and the integrity check's tables.
"""
from __future__ import annotations

import ast
import re

import pytest
import torch

from kforge_nb.cpp_source import preprocessed
from kforge_nb.evaluator.worker import audit, integrity
from kforge_nb.guardrails import Guardrails
from kforge_nb.result import CORRECT, REJECTED
from kforge_nb.targets.cpp import CppTarget
from tests.adversarial.support import source
from tests.adversarial.test_exploits import STATIC_OFF, Case, at_line, judge_case  # noqa: F401
from tests.adversarial.test_legitimate import run


def code_line(candidate: str, start: str) -> int:
    """The number of the candidate's first line that starts with `start` (code, never the
    docstring that quotes it)."""
    return next(n for n, line in enumerate(source(candidate).splitlines(), 1)
                if line.strip().startswith(start))


def at(candidate: str, start: str) -> str:
    """`line N: `, as a static rule names the line that starts with `start`."""
    return f"line {code_line(candidate, start)}: "


def through(candidate: str, op: str, start: str, code: str) -> str:
    """The audit naming an op that code of no file of the candidate's ran (what eval ran, a
    helper compiled under a made-up name), reached from the candidate's line."""
    return f"aten.{op} at line {code_line(candidate, start)} through {code} (rule"


def host_read(candidate: str, what: str, start: str) -> str:
    """The audit naming data taken out of torch at the line that starts with `start`."""
    n = code_line(candidate, start)
    return f"{what}() at line {n} (`{source(candidate).splitlines()[n - 1].strip()}`)"


GRID = "r4a_triton_softmax_grid_eval"
HOOK = "r4a_triton_softmax_prehook_eval"
LINE3 = "r4a_cpp_softmax_compiled_line3"
AUDIT = "r4a_cpp_softmax_edits_audit"

EXPLOITS = {
    # --- bans follow the object, not its spelling ---------------------------------------------
    "`from torch._C import _DisableTorchDispatch`, used by its bare name": Case(
        "softmax_rows", "r4a_cpp_softmax_imported_disable_dispatch", REJECTED,
        ["patching-or-introspection"],
        says=[at("r4a_cpp_softmax_imported_disable_dispatch", "from torch._C import") +
              "imports torch._C._DisableTorchDispatch",
              at("r4a_cpp_softmax_imported_disable_dispatch", "with _DisableTorchDispatch") +
              "_DisableTorchDispatch (torch._C._DisableTorchDispatch)"]),
    "kforge's audit imported, HARMLESS and LAUNCHES edited": Case(
        "softmax_rows", AUDIT, REJECTED, ["patching-or-introspection"],
        says=[at(AUDIT, "from kforge_nb.evaluator.worker import audit") +
              "imports kforge_nb.evaluator.worker.audit",
              at(AUDIT, "audit.HARMLESS.add(") + "audit.HARMLESS.add"]),
    "kforge's audit imported, HARMLESS and LAUNCHES edited (static rules off)": Case(
        "softmax_rows", AUDIT, REJECTED, ["tampering"], options=STATIC_OFF,
        says=["the candidate replaced kforge_nb.evaluator.worker.audit.HARMLESS "
              "(rule `tampering`)"]),
    "compile and exec under other names build a helper 'line 3'": Case(
        "softmax_rows", LINE3, REJECTED, ["patching-or-introspection"],
        says=[at(LINE3, "build, run = compile, exec") + "compile",
              at(LINE3, "build, run = compile, exec") + "exec",
              at(LINE3, "run(build(") + "build (compile)"]),
    # --- eval, exec and compile frames are the candidate's --------------------------------------
    "compile and exec under other names build a helper 'line 3' (static rules off)": Case(
        "softmax_rows", LINE3, REJECTED, ["torch-compute-at-runtime"], options=STATIC_OFF,
        says=[through(LINE3, "_softmax", "probs = row_softmax(", "'line 3' line 4")]),
    "Triton grid = functools.partial(eval, CODE)": Case(
        "softmax_rows", GRID, REJECTED, ["patching-or-introspection"], target="triton",
        says=[at(GRID, "grid = functools.partial(eval") + "eval"]),
    "Triton grid = functools.partial(eval, CODE) (static rules off)": Case(
        "softmax_rows", GRID, REJECTED, ["torch-compute-at-runtime"], target="triton",
        options=STATIC_OFF,
        says=[through(GRID, "_softmax", "copy_kernel[grid]", "'<string>' line 1")]),
    "autotune pre_hook = functools.partial(eval, CODE)": Case(
        "softmax_rows", HOOK, REJECTED, ["patching-or-introspection"], target="triton",
        says=[at(HOOK, "pre_hook=functools.partial(eval") + "eval"]),
    "autotune pre_hook = functools.partial(eval, CODE) (static rules off)": Case(
        "softmax_rows", HOOK, REJECTED, ["torch-compute-at-runtime"], target="triton",
        options=STATIC_OFF,
        says=[through(HOOK, "_softmax", "copy_kernel[lambda", "'<string>' line 1")]),
    # --- C++ read after the preprocessor --------------------------------------------------------
    "`#define NS a##t`, then NS::cpu::_softmax_out": Case(
        "softmax_rows", "r4a_cpp_softmax_token_pasting", REJECTED, ["native-calls-libtorch"],
        says=[at("r4a_cpp_softmax_token_pasting", "NS::cpu::_softmax_out(") +
              "at::cpu::_softmax_out"]),
    '`_Pragma("GCC optimize (\\"Ofast\\")")`': Case(
        "relu", "r4a_cpp_relu_pragma_ofast", REJECTED, ["fast-math"],
        says=[at("r4a_cpp_relu_pragma_ofast", "_Pragma(") + "#pragma GCC optimize"]),
    # --- data movement that computes ------------------------------------------------------------
    "trunc as .to(torch.int32).to(torch.float32)": Case(
        "r4a_trunc", "r4a_cpp_trunc_cast_roundtrip", REJECTED, ["torch-compute-at-runtime"],
        says=[at_line("r4a_cpp_trunc_cast_roundtrip", "_to_copy", "truncated = x.to(")]),
    "x.storage().tolist(), then Python's math": Case(
        "softmax_rows", "r4a_cpp_softmax_storage_tolist", REJECTED, ["host-compute"],
        says=[host_read("r4a_cpp_softmax_storage_tolist", "Storage.tolist", "values = ")]),
}

# name -> (problem, candidate, target, kernel launches over the 6 trials)
RUNS_HERE = {
    "F.pad (reflect), Tensor.unfold and torch.flip move data for the kernel":
        ("r4a_reflect_conv", "r4a_cpp_reflect_conv_moves", "cpp", "native x6"),
    "np.sqrt of the row length, a Python int":
        ("r4a_scaled_softmax", "r4a_cpp_scaled_softmax_np_sqrt", "cpp", "native x6"),
    "import multiprocessing to ask cpu_count()":
        ("relu", "r4a_cpp_relu_cpu_count", "cpp", "native x6"),
    "except Exception: return cpp.load(PORTABLE)":
        ("relu", "r4a_cpp_relu_portable_fallback", "cpp", "native x6"),
    "torch.backends.cudnn.benchmark = True":
        ("relu", "r4a_cpp_relu_cudnn_benchmark", "cpp", "native x6"),
}


@pytest.mark.parametrize("name", list(EXPLOITS))
def test_round4_exploit_is_rejected_naming_what_ran(name, judge_case):
    case = EXPLOITS[name]
    result = judge_case(case)
    assert result.state == case.state, f"{name}: {result.state}: {result.message}"
    assert result.rules == case.rules, result.message
    for fragment in case.says:
        assert fragment in result.message, result.message


@pytest.mark.parametrize("name", list(RUNS_HERE))
def test_round4_glue_is_correct(name, options):
    problem_name, candidate, target, launches = RUNS_HERE[name]
    result = run(problem_name, candidate, target, options)
    assert result.state == CORRECT, f"{name}: {result.state}: {result.message}"
    assert result.rules == []
    assert f"kernels launched: {launches}" in result.message


# --- what a name stands for ----------------------------------------------------------------------

def static(python: str) -> dict[str, list[str]]:
    """The default rules on a cpp candidate whose module holds `python`."""
    kernel = 'extern "C" void f(const float* x, float* y, long n) {}'
    text = ("import torch\nimport torch.nn as nn\nfrom kforge_nb.runtime import cpp\n" + python +
            f'\nkernels = cpp.load(r"""{kernel}""")\n\n\nclass ModelNew(nn.Module):\n'
            "    def forward(self, x):\n        y = torch.empty_like(x)\n"
            "        kernels.f(x, y, x.numel())\n        return y\n")
    return {rule.name: where for rule, where in
            Guardrails().check(text, ast.parse(text), CppTarget.required)}


@pytest.mark.parametrize("python, says", [
    ("import torch._C as C\nC._DisableTorchDispatch()\n", "C._DisableTorchDispatch "
                                                          "(torch._C._DisableTorchDispatch)"),
    ("T = torch\nq = T._C._DisableTorchDispatch\n", "T._C._DisableTorchDispatch "
                                                   "(torch._C._DisableTorchDispatch)"),
    ("from torch.utils import _python_dispatch as d\n", "imports torch.utils._python_dispatch"),
    ("run = exec\n", "exec"),
    ("import functools\nf = functools.partial(eval, 'x')\n", "eval"),
    ("import kforge_nb.evaluator.worker.harness as h\n",
     "imports kforge_nb.evaluator.worker.harness"),
    ("import kforge_nb\nk = kforge_nb.evaluator\n", "kforge_nb.evaluator"),
    ("import sys as s\nm = s.modules\n", "s.modules (sys.modules)"),
])
def test_a_ban_follows_the_name_to_what_it_is_bound_to(python, says):
    found = static(python)
    assert list(found) == ["patching-or-introspection"], found
    assert any(hit.endswith(says) for hit in found["patching-or-introspection"]), found


@pytest.mark.parametrize("python", [
    "from kforge_nb.runtime import cpp as build\n",
    "def compile(text):\n    return text\nsource = compile('x')\n",      # its own, not the builtin
    "import re\nPATTERN = re.compile('x')\n",
    "torch.backends.cudnn.benchmark = True\ntorch.backends.cudnn.deterministic = True\n",
    "import multiprocessing as mp\nfrom threading import get_ident\nN = mp.cpu_count()\n",
])
def test_names_bound_to_harmless_objects_pass(python):
    assert static(python) == {}


def test_starting_a_process_through_an_alias_is_still_a_process():
    found = static("import multiprocessing as mp\npool = mp.Pool(2)\n")
    assert list(found) == ["extra-threads-or-streams"]
    assert any(hit.endswith("mp.Pool (multiprocessing.Pool)")
               for hit in found["extra-threads-or-streams"])


# --- C++ after the preprocessor ------------------------------------------------------------------

def test_the_preprocessed_source_keeps_each_line_where_it_was():
    text = ('#include <torch/extension.h>\n%:define NS a%:%:t\n#define P(x) _Pragma(#x)\n'
            'void f() { NS::cpu::g(1,\n  2); }\nP(GCC optimize("Ofast"))\n#error not here\n')
    lines = preprocessed(text).split("\n")
    assert len(lines) == text.count("\n") + 1
    assert lines[3] == "void f() { at::cpu::g(1," and lines[4] == "2); }"
    assert lines[5] == '#pragma GCC optimize("Ofast")'
    assert lines[0] == lines[1] == lines[2] == lines[6] == ""     # no header was read


def test_a_branch_the_build_does_not_take_is_not_read_as_taken():
    text = "#ifdef _OPENMP\nint with_openmp;\n#else\nint without;\n#endif\n"
    assert "with_openmp" in preprocessed(text) and "without" not in preprocessed(text)


# --- casts that compute --------------------------------------------------------------------------

@pytest.mark.parametrize("source_dtype, target, computes", [
    (torch.float32, torch.int32, True),        # truncation
    (torch.float64, torch.int64, True),
    (torch.int64, torch.int8, True),           # wraps around
    (torch.float32, torch.bool, True),         # compares with zero
    (torch.complex64, torch.float32, True),    # drops the imaginary part
    (torch.float32, torch.float32, False),
    (torch.float64, torch.float32, False),     # rounds: an output cast
    (torch.float32, torch.float16, False),     # (precision is the precision rule's)
    (torch.int32, torch.float32, False),
    (torch.int8, torch.int64, False),
    (torch.bool, torch.float32, False),
])
def test_a_cast_computes_where_it_changes_values(source_dtype, target, computes):
    assert audit.changes_values(source_dtype, target) is computes


def audited(fn, *args) -> set[str]:
    """The ops (and host reads) an audit of a candidate file "candidate.py" records."""
    audit.know_existing_code()          # as a worker does before the candidate is imported
    watch = audit.Audit("candidate.py")
    with watch:
        fn(*args)
    return {op for op, _ in watch.compute}


def test_moving_data_is_harmless_and_a_truncating_cast_is_not():
    import torch.nn.functional as F
    x = torch.randn(2, 3, 8)
    assert audited(lambda: (F.pad(x, (1, 1), mode="reflect"), F.pad(x, (1, 1), value=2.0),
                            x.unfold(-1, 3, 1).contiguous(), torch.flip(x, [0]),
                            torch.roll(x, 1, -1), x.double().float())) == set()
    assert audited(lambda: x.to(torch.int32).to(torch.float32)) == {"_to_copy"}
    assert audited(lambda: torch.empty(3, dtype=torch.int64).copy_(x[0, 0, :3])) == {"copy"}


def test_code_compiled_under_any_file_name_is_named_without_a_line_to_misread():
    audit.know_existing_code()          # before the helper exists, as before a candidate
    code = compile("def helper(x):\n    return torch.softmax(x, -1)\n", "line 3", "exec")
    scope = {"torch": torch}
    exec(code, scope)
    watch = audit.Audit("candidate.py")
    with watch:
        scope["helper"](torch.randn(2, 4))
    [(op, where)] = list(watch.compute)
    assert op == "_softmax" and where == "'line 3' line 2"
    assert not re.match(r"line \d", where)     # only the candidate's lines read `line N`


def test_code_made_after_the_snapshot_is_not_known_whatever_its_file_name():
    audit.know_existing_code()
    assert torch.nn.functional.softmax.__code__ in audit.KNOWN_CODE
    forged = compile("def softmax(x):\n    return torch.softmax(x, -1)\n",
                     torch.nn.functional.__file__, "exec")
    assert not {c for c in forged.co_consts if isinstance(c, type(forged))} & audit.KNOWN_CODE


# --- the integrity check's tables ----------------------------------------------------------------

def test_editing_a_table_in_place_or_rebinding_it_is_tampering():
    before = integrity.snapshot()
    original, triton_code = audit.HARMLESS, set(audit.TRITON_CODE)
    try:
        audit.HARMLESS = audit.HARMLESS | {"_softmax"}
        audit.TRITON_CODE.add(test_editing_a_table_in_place_or_rebinding_it_is_tampering.__code__)
        changed = integrity.changed(before)
    finally:
        audit.HARMLESS = original
        audit.TRITON_CODE.clear()
        audit.TRITON_CODE.update(triton_code)
    assert "kforge_nb.evaluator.worker.audit.HARMLESS" in changed
    assert "kforge_nb.evaluator.worker.audit.TRITON_CODE" in changed
    assert integrity.changed(before) == []
    with pytest.raises(AttributeError):
        audit.HARMLESS.add("_softmax")             # not a set any more: nothing to edit


def test_state_the_audit_changes_as_it_runs_is_not_tampering():
    before = integrity.snapshot()
    audit.LAUNCHES["native"] += 1
    try:
        assert integrity.changed(before) == []
    finally:
        audit.LAUNCHES["native"] -= 1
