"""The JupyterLab renderer (labextension/src/index.ts) draws a real run record.

The record comes from a real session; the renderer runs in jsdom through `npm test` in
labextension/ (compiled by tsc). Skipped where node or the extension's node_modules are absent
(`cd labextension && npm install` sets it up).
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.test_magic import GOOD, WRONG, answer, api, ip, kforge, recommendation  # noqa: F401

LABEXTENSION = Path(__file__).parent.parent / "labextension"
pytestmark = pytest.mark.skipif(
    shutil.which("npm") is None or not (LABEXTENSION / "node_modules" / "jsdom").is_dir(),
    reason="needs npm and `npm install` in labextension/")


def test_renderer_draws_the_candidates_table_and_shows_code_on_click(api, kforge, tmp_path):
    from kforge_nb.ui.report import run_record
    api([answer(WRONG), answer(GOOD)])
    session = kforge("--iterations 2")
    record_path = tmp_path / "record.json"
    record_path.write_text(json.dumps(run_record(session), default=str))
    proc = subprocess.run(["npm", "test", "--silent", "--", str(record_path)], cwd=LABEXTENSION,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "2 candidates over 2 iterations" in seen["header"]
    assert seen["rows"][0].startswith("0.0 | initial | mismatch")
    assert seen["rows"][1].startswith("1.0 ★ | fix | correct")
    assert "candidate 0.0 (mismatch)" in seen["code_after_click"]
    assert "0.5f * inv_sum" in seen["code_after_click"]
    assert seen["chart"] and seen["scripts"] == 0
