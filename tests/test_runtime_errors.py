"""Exceptions, crash signals, hangs and memory blow-ups are `runtime_error`, saying which, and
end the candidate's child process only."""
from kforge_nb.result import RUNTIME_ERROR
from tests.support.evaluator import candidate_source, line_of


def test_python_exception_in_forward_is_runtime_error_naming_exception_and_line(judge):
    result = judge("relu", "python_exception_in_forward")
    line = line_of(candidate_source("python_exception_in_forward"), "x.shape[2]")
    assert result.state == RUNTIME_ERROR
    assert result.error["type"] == "IndexError"
    assert "IndexError" in result.message
    assert f"line {line}" in result.message
    assert result.error["line"] == line


def test_cpp_null_pointer_write_is_runtime_error_with_SIGSEGV(judge):
    result = judge("relu", "cpp_null_pointer_write")
    assert result.state == RUNTIME_ERROR
    assert result.error["type"] == "crash"
    assert "SIGSEGV" in result.message


def test_cpp_abort_is_runtime_error_with_SIGABRT(judge):
    result = judge("relu", "cpp_abort")
    assert result.state == RUNTIME_ERROR
    assert result.error["type"] == "crash"
    assert "SIGABRT" in result.message


def test_infinite_loop_is_runtime_error_timeout_and_the_next_candidate_runs(judge):
    result = judge("relu", "cpp_infinite_loop", timeout_s=4)
    assert result.state == RUNTIME_ERROR
    assert result.error["type"] == "timeout"
    assert "no answer within 4 s" in result.message
    assert judge("relu", "cpp_relu", measure=False).state == "correct"


def test_memory_blowup_is_runtime_error_out_of_memory(judge):
    result = judge("relu", "memory_blowup", memory_bytes=2**30)
    assert result.state == RUNTIME_ERROR
    assert result.error["type"] == "out_of_memory"
    assert "1.00 GiB limit" in result.message

