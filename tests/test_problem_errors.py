"""An unusable reference is a `ProblemError` whose message says what is wrong and where."""
import pytest

from kforge_nb.evaluator import ProblemError, evaluate
from tests.support.evaluator import candidate_source, load_problem


def test_reference_without_a_model_class_is_problem_error():
    with pytest.raises(ProblemError, match=r"no_model\.py defines no `Model`.*MyModel"):
        load_problem("no_model")


def test_reference_with_a_syntax_error_is_problem_error_with_its_line():
    with pytest.raises(ProblemError, match=r"syntax_error\.py, line 7: the reference does not "
                                           r"parse"):
        load_problem("syntax_error")


def test_reference_whose_get_inputs_raises_is_problem_error_naming_line_and_exception(options):
    problem = load_problem("get_inputs_raises")      # parses fine: it fails only when run
    with pytest.raises(ProblemError) as caught:
        evaluate(problem, candidate_source("cpp_relu"), "cpp", options())
    message = str(caught.value)
    assert "get_inputs_raises.py line 12" in message
    assert "RuntimeError" in message and "is invalid for input of size 512" in message
    assert "get_inputs()" in message                  # what to check


def test_a_failed_reference_leaves_no_half_written_file(options, tmp_path):
    with pytest.raises(ProblemError):
        evaluate(load_problem("get_inputs_raises"), candidate_source("cpp_relu"), "cpp",
                 options(trials=2))
    assert not [p for p in (tmp_path / "runs").rglob("*") if ".tmp" in p.name]
