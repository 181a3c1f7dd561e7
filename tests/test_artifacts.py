"""Every evaluation leaves one folder: candidate, result.json, worker log; whole files only."""
import json
from pathlib import Path

import pytest

from kforge_nb.result import SCHEMA_VERSION, Result
from tests.support.evaluator import candidate_source


@pytest.mark.parametrize("candidate", ["cpp_relu", "cpp_null_pointer_write"])
def test_artifacts_folder_holds_candidate_result_json_and_worker_log(judge, candidate):
    result = judge("relu", candidate)
    folder = Path(result.artifacts)
    saved = json.loads((folder / "result.json").read_text())
    assert saved["schema_version"] == SCHEMA_VERSION
    assert Result.from_dict(saved).state == result.state
    assert (folder / "candidate.py").read_text() == candidate_source(candidate)
    assert (folder / "worker.log").is_file()
    assert not [p.name for p in folder.rglob("*") if ".tmp" in p.name]


def test_what_the_candidate_prints_goes_to_worker_log_not_the_callers_output(judge, capfd):
    result = judge("relu", "cpp_relu_chatty", measure=False)
    log = (Path(result.artifacts) / "worker.log").read_text()
    assert "chatty candidate imported" in log
    assert "forward called with (8, 64)" in log
    assert "relu kernel: 512 elements" in log
    out, err = capfd.readouterr()
    assert "chatty" not in out + err and "relu kernel" not in out + err
