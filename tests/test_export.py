"""`session.export(path)`: one .py that runs with torch alone, kforge-nb nowhere in sight.

The exported file is run in a fresh virtual environment whose only link to the test's venv is a
.pth line naming the folder that holds torch. .pth files *inside* that folder are not processed,
so the editable install of kforge-nb (a .pth-installed import finder) is invisible: the test
first proves `import kforge_nb` fails there, then runs the file and compares its output with the
reference computed here.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.test_magic import (BROKEN, EXAMPLES, GOOD, answer, api, ip, kforge,  # noqa: F401
                              magics)

pytestmark = pytest.mark.slow     # each test runs sessions; the exported file runs in a fresh venv


@pytest.fixture(scope="module")
def python_without_kforge(tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("venv-without-kforge")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "torch_only.pth").write_text(str(Path(torch.__file__).parents[1]) + "\n")
    return python


def run_isolated(python: Path, *args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-I", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def test_exported_cpp_kernel_runs_without_kforge_installed(api, kforge, python_without_kforge,
                                                           tmp_path):
    api([answer(BROKEN), answer(GOOD)])
    session = kforge("--iterations 2")
    path = session.export(tmp_path / "export" / "softmax_kernel.py")
    probe = run_isolated(python_without_kforge, "-c", "import kforge_nb", cwd=tmp_path)
    assert "No module named 'kforge_nb'" in probe.stderr
    proc = run_isolated(python_without_kforge, path, "--save", tmp_path / "out.pt",
                        "--repeats", "3", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["allclose"] and report["shape"] == [64, 1000]
    saved = torch.load(tmp_path / "out.pt")
    torch.testing.assert_close(saved["output"], torch.softmax(saved["inputs"][0], dim=-1),
                               atol=1e-5, rtol=1e-5)


def test_exported_file_names_its_verdict_and_imports_as_a_module(api, kforge, tmp_path):
    api([answer(GOOD)])
    session = kforge("--iterations 1")
    path = session.export(tmp_path / "kernel")
    text = path.read_text()
    assert path.suffix == ".py" and "correct: matches the reference" in text
    assert "class ModelNew" in text and "REFERENCE = r'''" in text
    namespace = {"__name__": "exported"}
    exec(compile(text, str(path), "exec"), namespace)        # importable, main not run
    x = torch.randn(4, 1000)
    torch.testing.assert_close(namespace["ModelNew"]()(x), torch.softmax(x, dim=-1))


def test_export_without_a_correct_candidate_says_so(api, kforge, tmp_path):
    from kforge_nb.export import ExportError
    api([answer(BROKEN)])
    session = kforge("--iterations 1")
    with pytest.raises(ExportError, match="no correct candidate"):
        session.export(tmp_path / "nothing.py")


def test_exported_triton_kernel_runs_without_kforge_in_the_interpreter_on_a_cpu(
        api, kforge, python_without_kforge, tmp_path):
    if torch.cuda.is_available():
        pytest.skip("checks the CPU fallback (Triton's interpreter)")
    triton_kernel = (EXAMPLES / "triton_softmax.py").read_text()
    api([answer(triton_kernel)])
    session = kforge("--iterations 1 --target triton")
    path = session.export(tmp_path / "triton_softmax_kernel.py")
    assert "TRITON_INTERPRET" in path.read_text()
    proc = run_isolated(python_without_kforge, path, "--repeats", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["allclose"]
