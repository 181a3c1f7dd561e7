"""A candidate that does not build is `compile_failure`, located in the candidate file."""
from kforge_nb.result import COMPILE_FAILURE
from tests.support.evaluator import candidate_source, line_of


def test_python_syntax_error_is_compile_failure_with_line_number(judge):
    result = judge("relu", "python_syntax_error")
    line = line_of(candidate_source("python_syntax_error"), "def forward")
    assert result.state == COMPILE_FAILURE
    assert result.error["type"] == "SyntaxError"
    assert result.error["line"] == line
    assert f"line {line}" in result.message


def test_triton_non_power_of_two_arange_is_compile_failure_at_the_kernel_line(judge):
    result = judge("tiny_add", "triton_arange_not_power_of_two", target="triton")
    assert result.state == COMPILE_FAILURE
    assert "power of 2" in result.message
    assert result.error["line"] == line_of(candidate_source("triton_arange_not_power_of_two"),
                                           "offsets = tl.arange(0, 3)")


def test_cpp_compile_error_is_compile_failure_with_compiler_message_and_both_lines(judge):
    source = candidate_source("cpp_compile_error")
    candidate_line = line_of(source, "yy[i]")
    cpp_line = line_of(source.split('r"""', 1)[1], "yy[i]")
    result = judge("relu", "cpp_compile_error")
    assert result.state == COMPILE_FAILURE
    assert "not declared" in result.message                 # g++'s own words
    assert f"line {candidate_line}" in result.message       # where it is in candidate.py
    assert f"line {cpp_line}" in result.message             # where it is in the C++ source
    assert result.error["line"] == candidate_line
    assert result.error["native_line"] == cpp_line
    assert f"kernel.cpp:{cpp_line}:" in result.error["log"]
