"""Bad input gets a clear message and loses nothing, end to end (real workers, real g++).

1. What get_inputs() returns: ints, floats and bools are arguments like any other; a bare
   tensor, None, a string or a dict is an unusable reference (`ProblemError`, exit 2) that
   names get_inputs() and what it returned.
2. Output kinds: each is `correct` when right and `mismatch`, naming the output and why, when
   wrong: no or many parameters, tuples and lists, views, int64, bool, float16, bfloat16, 0-d.
3. Huge shapes: inputs or weights too large are refused before anything is allocated; a huge
   intermediate inside forward is a memory error, and the caller goes on.
4. Malformed files: a reference that cannot be built is exit 2 with its line; a candidate that
   is empty, binary or has no ModelNew is a verdict (exit 1).
"""
import json
import re
import textwrap
from pathlib import Path

import pytest

from kforge_nb.evaluator import ProblemError, evaluate
from kforge_nb.guardrails import Guardrails
from kforge_nb.problem import Problem
from kforge_nb.result import COMPILE_FAILURE, CORRECT, MISMATCH, REJECTED, RUNTIME_ERROR
from tests.support.evaluator import CANDIDATES, PROBLEMS, candidate_source, load_problem

FAST = ["--target", "cpp", "--no-compile-baseline", "--trials", "2", "--out", "runs", "--json"]
TORCH = Guardrails(allow=["*"])        # candidates that are plain torch code: output kinds


def reference(forward: str, inputs: str = "[torch.randn(8, 16)]", init: str = "[]") -> str:
    return textwrap.dedent(f"""\
        import torch
        import torch.nn as nn


        class Model(nn.Module):
            def forward(self, x):
                return {forward}


        def get_inputs():
            return {inputs}


        def get_init_inputs():
            return {init}
        """)


def candidate(forward: str) -> str:
    return textwrap.dedent(f"""\
        import torch
        import torch.nn as nn


        class ModelNew(nn.Module):
            def forward(self, x):
                return {forward}
        """)


def judge_torch(options, ref: str, cand: str, **overrides):
    return evaluate(Problem.from_string(ref, name="kind"), cand, "cpp",
                    options(trials=2, guardrails=TORCH, **overrides))


# --- 1. what get_inputs() returns ---------------------------------------------------------------


@pytest.mark.parametrize("forward, state, says", [
    ("(x * scale).sum(dim=dim, keepdim=keepdim)", CORRECT, "matches the reference"),
    ("(x * scale).sum(dim=dim)", MISMATCH, "output has shape (8,), expected (8, 1)"),
    ("x.sum(dim=dim, keepdim=keepdim)", MISMATCH, "output: 100.00% of values outside"),
], ids=["uses all four", "ignores keepdim", "ignores scale"])
def test_ints_floats_and_bools_from_get_inputs_reach_forward_and_are_judged(
        options, forward, state, says):
    cand = textwrap.dedent(f"""\
        import torch.nn as nn


        class ModelNew(nn.Module):
            def forward(self, x, dim, scale, keepdim):
                return {forward}
        """)
    result = evaluate(load_problem("scaled_sum_dim"), cand, "cpp",
                      options(trials=2, guardrails=TORCH))
    assert result.state == state, result.message
    assert says in result.message


@pytest.mark.parametrize("returns, says", [
    ("torch.randn(4, 8)", "get_inputs() returned a Tensor of shape (4, 8) (float32), not a list "
                          "of forward's arguments in order; wrap it: `return [x]`"),
    ("None", "get_inputs() returned None (is its `return` missing?)"),
    ("'x'", "get_inputs() returned a str ('x'), not a list"),
    ("{'x': torch.randn(4, 8)}", "get_inputs() returned a dict with keys ['x'], not a list"),
    ("7", "get_inputs() returned an int (7), not a list"),
], ids=["bare tensor", "None", "string", "dict", "int"])
def test_get_inputs_returning_no_argument_list_is_problem_error_naming_what_it_returned(
        options, returns, says):
    """Before, `list()` split a bare tensor into rows, a string into characters and a dict into
    its keys, and forward was called with those."""
    problem = Problem.from_string(reference("x * 2", inputs=returns), name="bad_inputs")
    with pytest.raises(ProblemError) as caught:
        evaluate(problem, candidate("x * 2"), "cpp", options(trials=2, guardrails=TORCH))
    message = str(caught.value)
    assert message.startswith("<bad_inputs>: ") and says in message
    assert "\n" not in message


def test_get_init_inputs_returning_no_argument_list_is_problem_error(options):
    problem = Problem.from_string(reference("x * 2", init="16"), name="bad_init")
    with pytest.raises(ProblemError, match=r"get_init_inputs\(\) returned an int \(16\), not a "
                                           r"list of the constructor's arguments"):
        evaluate(problem, candidate("x * 2"), "cpp", options(trials=2, guardrails=TORCH))


# --- 2. output kinds ----------------------------------------------------------------------------

# id: (reference's forward, a right candidate's, a wrong candidate's, what the mismatch says)
OUTPUT_KINDS = {
    "no parameters": ("x * 2 + 1", "x * 2 + 1", "x * 2", "output: 100.00% of values outside"),
    "tuple of 3, one wrong": ("x * 2, x + 1, x.sum(-1)", "x * 2, x + 1, x.sum(-1)",
                              "x * 2, x + 1.01, x.sum(-1)", "output 1: 100.00% of values outside"),
    "tuple, order swapped": ("x * 2, x.sum(-1)", "x * 2, x.sum(-1)", "x.sum(-1), x * 2",
                             "output 0 has shape (8,), expected (8, 16)"),
    "tuple, one output missing": ("x * 2, x.sum(-1)", "(x * 2, x.sum(-1))", "x * 2",
                                  "returned 1 output, the reference returns 2"),
    "list": ("[x.relu(), x.abs()]", "[x.relu(), x.abs()]", "[x.relu(), x]",
             "output 1: "),
    "transposed view of the input": ("x.t()", "x.t()", "x.t() * 1.01", "output: "),
    "strided slice": ("x[:, ::2]", "x[:, ::2].contiguous()", "x[:, 1::2]", "output: "),
    "int64, off by one": ("x.argmax(-1)", "x.argmax(-1)", "x.argmax(-1) + 1",
                          "output: 8 of 8 values differ; at ["),
    "int64, wrong dtype": ("x.argmax(-1)", "x.argmax(dim=-1)", "x.argmax(-1).int()",
                           "output has dtype torch.int32, expected torch.int64"),
    "bool": ("x > 0", "x > 0", "x > 0.5", "values differ; at "),
    "float16": ("torch.softmax(x.half(), -1)", "torch.softmax(x, -1).half()",
                "(torch.softmax(x, -1) * 1.01).half()", "output: "),
    "float16, wrong dtype": ("torch.softmax(x.half(), -1)", "torch.softmax(x.float(), -1).half()",
                             "torch.softmax(x, -1)",
                             "output has dtype torch.float32, expected torch.float16"),
    "bfloat16": ("x.bfloat16() @ x.bfloat16().t()",
                 "(x.bfloat16().float() @ x.bfloat16().float().t()).bfloat16()",
                 "(x.bfloat16().float() @ x.bfloat16().float().t() * 1.05).bfloat16()",
                 "output: "),
    "0-d scalar": ("x.sum()", "x.sum()", "x.sum() + 0.5", "output: 100.00% of values outside"),
}


# variants of a kind above whose messages another row also says (plain float32, a shape, a
# view, a sequence, a dtype): in the full run; the fast tier judges the other rows
VARIANTS = {"no parameters", "tuple, order swapped", "list", "transposed view of the input",
            "float16, wrong dtype"}


@pytest.mark.parametrize("kind", [pytest.param(kind, marks=pytest.mark.slow)
                                  if kind in VARIANTS else kind for kind in OUTPUT_KINDS])
@pytest.mark.parametrize("answer", ["right", "wrong"])
def test_each_output_kind_is_correct_when_right_and_a_named_mismatch_when_wrong(
        options, kind, answer):
    ref, right, wrong, says = OUTPUT_KINDS[kind]
    result = judge_torch(options, reference(ref), candidate(right if answer == "right" else wrong))
    if answer == "right":
        assert result.state == CORRECT, result.message
        assert "weights none (the reference has no parameters)" in result.message
    else:
        assert result.state == MISMATCH, result.message
        assert says in result.message


def test_low_precision_outputs_are_held_to_about_one_unit_in_the_last_place(options):
    """float16 and bfloat16 tolerances (strict policy): an answer computed in fp32 and rounded
    once passes (above); a sum accumulated in the low precision itself drifts by several units
    in the last place over 1024 terms, and is a mismatch."""
    ref = reference("x.half().sum(-1)", inputs="[torch.randn(8, 1024)]")
    drifting = candidate("torch.stack([sum(r.half().unbind()) for r in x.unbind()])")
    result = judge_torch(options, ref, drifting)
    assert result.state == MISMATCH, result.message
    assert result.correctness.tolerance["atol"] == result.correctness.tolerance["rtol"] == 1e-3
    assert result.correctness.dtype == "float16"


def test_a_correct_tuple_reports_its_first_outputs_shape_and_dtype(options):
    result = judge_torch(options, reference("x * 2, x.sum(-1) > 0"),
                         candidate("x * 2, x.sum(-1) > 0"))
    assert result.state == CORRECT, result.message
    assert result.correctness.shape == [5, 16]      # the other-batch trial, the first output
    assert result.correctness.dtype == "float32"


TWO_LINEAR = {
    # same parameter names, zero-initialised: correct only because the weights are copied
    "same names": ("self.fc1 = nn.Linear(a, b)\n        self.fc2 = nn.Linear(b, c)\n"
                   "        for p in self.parameters():\n            nn.init.zeros_(p)",
                   "self.fc2(torch.relu(self.fc1(x)))", CORRECT,
                   "weights copied from the reference (parameter names match)"),
    "other names": ("self.first = nn.Linear(a, b)\n        self.second = nn.Linear(b, c)",
                    "self.second(torch.relu(self.first(x)))", CORRECT,
                    "weights seeded identically (parameter names differ"),
    "relu forgotten": ("self.fc1 = nn.Linear(a, b)\n        self.fc2 = nn.Linear(b, c)",
                       "self.fc2(self.fc1(x))", MISMATCH, "output: "),
}


@pytest.mark.parametrize("case", TWO_LINEAR)
def test_a_module_with_many_parameters_gets_the_references_weights(options, case):
    layers, forward, state, says = TWO_LINEAR[case]
    cand = (f"import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
            f"    def __init__(self, a, b, c):\n        super().__init__()\n        {layers}\n\n"
            f"    def forward(self, x):\n        return {forward}\n")
    result = evaluate(load_problem("two_linear"), cand, "cpp",
                      options(trials=2, guardrails=TORCH))
    assert result.state == state, result.message
    assert says in result.message


@pytest.mark.parametrize("problem, cand, state, says", [
    ("relu_and_mask", "cpp_relu_and_mask", CORRECT, "kernels launched: native"),
    ("relu_and_mask", "cpp_relu_and_mask_flipped", MISMATCH,
     "output 1: 1 of 512 values differ; at [7, 63]: got "),
    ("argmax_rows", "cpp_argmax", CORRECT, "kernels launched: native"),
    ("argmax_rows", "cpp_argmax_one_based", MISMATCH, "output: 16 of 16 values differ; at "),
])
def test_own_cpp_kernels_with_tuple_bool_and_int64_outputs(judge, problem, cand, state, says):
    """Under the default guardrails (no torch compute): the C++ kernel's answer is judged."""
    result = judge(problem, cand, trials=2)
    assert result.state == state, result.message
    assert says in result.message


# --- 3. huge shapes -----------------------------------------------------------------------------


@pytest.mark.parametrize("problem, memory_gib, says", [
    ("huge_input", None, "needs about 596.0 GiB on cpu (inputs 149.0 GiB, outputs 149.0 GiB, "
                         "weights 0.0 GiB"),
    ("huge_weights", None, "needs about 298.0 GiB on cpu (inputs 0.0 GiB, outputs 0.0 GiB, "
                           "weights 149.0 GiB"),
    # 4 GiB fits this host: only the size check (not a failed malloc) can refuse it this way
    ("large_input_4gib", 1, "needs about 16.0 GiB on cpu (inputs 4.0 GiB, outputs 4.0 GiB"),
])
def test_a_problem_too_large_is_refused_on_fake_tensors_before_anything_is_allocated(
        options, problem, memory_gib, says):
    overrides = {"memory_bytes": memory_gib << 30} if memory_gib else {}
    with pytest.raises(ProblemError) as caught:
        evaluate(load_problem(problem), candidate_source("cpp_relu"), "cpp",
                 options(trials=2, **overrides))
    message = str(caught.value)
    assert says in message
    assert "nothing was allocated" in message
    if memory_gib:
        assert "each worker's memory limit offers 1.0 GiB" in message


def test_a_huge_intermediate_in_the_references_forward_is_problem_error_naming_memory(options):
    """The size check sees inputs, outputs and weights, not what forward allocates on the way.
    The reference's 100 GB copy fails where it is made (or at the memory limit, on a host
    that hands it out); either way the message says memory, and nothing else is harmed."""
    with pytest.raises(ProblemError) as caught:
        evaluate(load_problem("huge_intermediate"), candidate_source("cpp_relu"), "cpp",
                 options(trials=2, memory_bytes=2 << 30))
    message = str(caught.value)
    assert "memory" in message
    if "can't allocate memory" in message:            # the usual case: malloc refuses 100 GB
        assert "huge_intermediate.py line 9 (copies = x.expand(25_000, *x.shape)" in message
        assert "(93.1 GiB in one allocation)" in message


def test_a_huge_intermediate_in_the_candidate_is_runtime_error_and_the_caller_goes_on(judge):
    result = judge("relu", "cpp_relu_huge_scratch", trials=2, memory_bytes=2 << 30)
    assert result.state == RUNTIME_ERROR, result.message
    assert "memory" in result.message
    assert result.resources["candidate_peak_gib"] < 3
    again = judge("relu", "cpp_relu", trials=2)       # the same process judges the next one
    assert again.state == CORRECT, again.message


# --- 4. malformed files -------------------------------------------------------------------------


def test_reference_whose_model_constructor_raises_is_problem_error_with_its_line(options):
    with pytest.raises(ProblemError) as caught:
        evaluate(load_problem("model_init_raises"), candidate_source("cpp_relu"), "cpp",
                 options(trials=2))
    message = str(caught.value)
    assert ("model_init_raises.py line 10 (raise ValueError(f\"width must be a multiple of 8, "
            "got {width}\")): running the reference raised ValueError: width must be a "
            "multiple of 8, got 12.") in message


@pytest.mark.parametrize("data, says", [
    (b"# caf\xe9\nimport torch\n", "line 1, column 6: byte 0xe9 is not UTF-8 text"),
    (b"import torch\n\x00\x01class Model: pass\ndef get_inputs(): return []\n",
     "line 2: the file holds a null byte, so it is not Python source"),
], ids=["latin-1 without a coding line", "null byte"])
def test_reference_that_is_not_text_is_problem_error_naming_line_and_byte(tmp_path, data, says):
    path = tmp_path / "ref.py"
    path.write_bytes(data)
    with pytest.raises(ProblemError, match=re.escape("ref.py, " + says)):
        Problem.from_file(path)


def test_reference_in_latin_1_with_a_coding_line_is_read_as_python_reads_it(tmp_path):
    path = tmp_path / "ref.py"
    relu = (PROBLEMS / "relu.py").read_bytes()
    path.write_bytes(b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + relu)
    assert "# café" in Problem.from_file(path).source


def test_candidate_without_modelnew_is_rejected_naming_the_rule(judge):
    result = judge("relu", "named_model_not_modelnew")
    assert result.state == REJECTED and result.rules[0] == "defines-modelnew"   # and cpp's own
    assert "no `class ModelNew(nn.Module)`" in result.message


@pytest.mark.parametrize("text", ["", "\n\n   \n"], ids=["empty", "blank lines"])
def test_empty_candidate_is_rejected_saying_it_is_empty(options, text):
    result = evaluate(load_problem("relu"), text, "cpp", options())
    assert result.state == REJECTED and result.rules == ["defines-modelnew"]
    assert result.message.startswith("candidate.py is empty")


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10"


def test_binary_candidate_is_compile_failure_naming_the_byte_and_kept_as_it_was(options):
    result = evaluate(load_problem("relu"), PNG, "cpp", options())
    assert result.state == COMPILE_FAILURE
    assert result.message.startswith("candidate.py, line 1, column 1: byte 0x89 is not UTF-8 text")
    assert (Path(result.artifacts) / "candidate.py").read_bytes() == PNG     # lost nothing


def test_candidate_text_holding_a_null_byte_is_compile_failure_with_its_line(options):
    result = evaluate(load_problem("relu"), "import torch\nx = 1\n\x00\n", "cpp", options())
    assert result.state == COMPILE_FAILURE
    assert result.message == ("candidate.py line 3: the file holds a null byte, so it is not "
                              "Python source (a binary file?)")
    assert result.error["line"] == 3


def test_candidate_bytes_in_latin_1_with_a_coding_line_are_judged(options):
    source = b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + (CANDIDATES / "cpp_relu.py").read_bytes()
    result = evaluate(load_problem("relu"), source, "cpp", options(trials=2))
    assert result.state == CORRECT, result.message


# --- through `kforge eval`: exit 2 for an unusable reference, 1 and a verdict for a candidate ----


BAD_REFERENCES = {   # name: (a file's bytes, or a file in tests/problems; what stderr says)
    "get_inputs returns a bare tensor": (
        reference("x", inputs="torch.randn(4, 8)").encode(),
        "ref.py: get_inputs() returned a Tensor of shape (4, 8)"),
    "Model.__init__ raises": ("model_init_raises", "model_init_raises.py line 10 (raise "),
    "huge input": ("huge_input", "inputs 149.0 GiB"),
    "not UTF-8": (b"# caf\xe9\n", "ref.py, line 1, column 6: byte 0xe9 is not UTF-8 text"),
}


@pytest.mark.parametrize("case", BAD_REFERENCES)
@pytest.mark.slow     # a `kforge eval` process per row (test_cli.py has the fast one)
def test_cli_unusable_reference_exits_2_with_one_line(kforge_cli, tmp_path, case):
    content, says = BAD_REFERENCES[case]
    path = PROBLEMS / f"{content}.py" if isinstance(content, str) else tmp_path / "ref.py"
    if isinstance(content, bytes):
        path.write_bytes(content)
    proc = kforge_cli("eval", str(path), str(CANDIDATES / "cpp_relu.py"), *FAST)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kforge: ") and says in lines[0]


@pytest.mark.parametrize("content, state, says", [
    (b"", REJECTED, "candidate.py is empty"),
    ((CANDIDATES / "named_model_not_modelnew.py").read_bytes(), REJECTED,
     "no `class ModelNew(nn.Module)`"),
    (PNG, COMPILE_FAILURE, "byte 0x89 is not UTF-8 text"),
], ids=["empty", "no ModelNew", "binary"])
def test_cli_bad_candidate_exits_1_with_a_verdict(kforge_main, tmp_path, content, state, says):
    path = tmp_path / "cand.py"
    path.write_bytes(content)
    proc = kforge_main("eval", str(PROBLEMS / "relu.py"), str(path), *FAST)
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    assert result["state"] == state and says in result["message"]
