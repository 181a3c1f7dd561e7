"""`kforge eval`: one JSON object with --json; exit 0 iff correct, 1 for any other verdict,
2 with a one-paragraph message for an unusable reference.

Exit 0 and 1 from a real `kforge` process (stdout holds the JSON alone while C++ prints); the
rule and the unusable references through cli.main in this process (kforge_main), as the
process would say them, without importing torch again for each."""
import json

import pytest

from kforge_nb.result import SCHEMA_VERSION, STATES
from tests.support.evaluator import CANDIDATES, PROBLEMS

FAST = ["--target", "cpp", "--no-compile-baseline", "--json", "--out", "runs"]


def only_json_object(stdout: str) -> dict:
    data = json.loads(stdout)          # fails on anything but one JSON document
    assert stdout.strip().startswith("{") and stdout.count("\n") == 1
    return data


def test_cli_json_prints_one_result_object_and_exits_0_when_correct(kforge_cli):
    chatty = CANDIDATES / "cpp_relu_chatty.py"       # prints from Python and from C++
    proc = kforge_cli("eval", str(PROBLEMS / "relu.py"), str(chatty), *FAST)
    result = only_json_object(proc.stdout)
    assert proc.returncode == 0, proc.stderr
    assert result["state"] == "correct" and result["state"] in STATES
    assert result["schema_version"] == SCHEMA_VERSION


def test_cli_exits_1_when_the_verdict_is_not_correct(kforge_cli):
    proc = kforge_cli("eval", str(PROBLEMS / "relu.py"), str(CANDIDATES / "cpp_leaky_relu.py"),
                      *FAST)
    result = only_json_object(proc.stdout)
    assert proc.returncode == 1, proc.stderr
    assert result["state"] == "mismatch"


def test_cli_ban_option_rejects_with_exit_1(kforge_main):
    proc = kforge_main("eval", str(PROBLEMS / "relu.py"), str(CANDIDATES / "cpp_relu.py"),
                      "--ban", "int64_t", *FAST)
    result = only_json_object(proc.stdout)
    assert proc.returncode == 1
    assert result["state"] == "rejected" and result["rules"] == ["user-ban:int64_t"]


@pytest.mark.parametrize("reference, says", [
    ("no_model", "defines no `Model`"),
    ("syntax_error", "line 7: the reference does not parse"),
    ("get_inputs_raises", "running the reference raised RuntimeError"),
])
def test_cli_unusable_reference_exits_2_with_one_paragraph_and_no_traceback(
        kforge_main, reference, says):
    proc = kforge_main("eval", str(PROBLEMS / f"{reference}.py"), str(CANDIDATES / "cpp_relu.py"),
                      *FAST)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kforge: ")
    assert says in lines[0]
