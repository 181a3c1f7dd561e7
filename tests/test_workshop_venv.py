"""The workshop as a new user meets it: every notebook, Run All, in a fresh `kforge-nb[lab]` venv.

A person who follows the README or opens Binder gets `pip install "kforge-nb[lab]"` in a new
environment: none of the dev extras, no API key, no GPU, and no network once it is installed.
These tests build that environment as Binder's files say (the torch pinned in
binder/requirements.txt first, then the extra binder/postBuild installs), from a copy of this
checkout's files and not editable, so the notebooks get what a wheel holds. They run every
notebook in notebooks/ headless from its own folder (`run_and_save.py --into`: every cell,
whatever an earlier one did) with the network cut (a network namespace of its own, loopback
only) and a new HOME, and read back what each cell did. Then they uninstall Triton, an optional
part, and run the notebook that uses it again: it must say what is missing and go on.

The venv takes minutes (torch, JupyterLab and Triton unpacked: about 2 GB) and the notebooks
build and time kernels on a shared 2-core machine, so the file is marked slow, each test has a
long timeout and nothing here depends on a timing; `--dist loadfile` keeps the file on one
worker, in order.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from tests.test_notebook_files import NOTEBOOKS, outputs, shown_text

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
TRITON_NOTEBOOK = "04_cross_platform.ipynb"      # the notebook with a Triton section
# a network namespace of its own with only loopback up (the kernel talks to its client there)
OFFLINE = ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "offline"]
ANSI = re.compile(r"\x1b\[[0-9;]*m")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]


@dataclass(frozen=True)
class Workshop:
    venv: Path
    notebooks: Path       # a copy of notebooks/, as a person downloads it or Binder checks it out
    home: Path

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")


def binder_torch() -> str:
    """The torch requirement of binder/requirements.txt ("torch==2.13.0")."""
    lines = (BINDER / "requirements.txt").read_text().splitlines()
    pins = [line.strip() for line in lines if re.match(r"\s*torch\s*==", line)]
    assert len(pins) == 1, f"binder/requirements.txt pins torch once, not {pins}"
    return pins[0]


def binder_extra() -> str:
    """The extra binder/postBuild installs kforge-nb with ("[lab]")."""
    found = re.findall(r'pip install [^\n]*"\.(\[[\w,-]+\])"', (BINDER / "postBuild").read_text())
    assert len(found) == 1, f"binder/postBuild installs kforge-nb once, with an extra: {found}"
    return found[0]


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(command, capture_output=True, text=True, **kwargs)
    assert proc.returncode == 0, \
        f"{' '.join(command)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def network_can_be_cut() -> bool:
    return shutil.which("unshare") is not None and shutil.which("ip") is not None and \
        subprocess.run([*OFFLINE, "true"], capture_output=True).returncode == 0


def copy_checkout(dest: Path) -> Path:
    """This checkout's files as a clone has them (tracked, and new files git does not ignore):
    no .venv, no node_modules, no build folders."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, text=True)
    if listed.returncode:
        pytest.skip(f"not a git checkout, so no clone's files to install from: {listed.stderr}")
    for name in filter(None, listed.stdout.split("\0")):
        source = ROOT / name
        if source.is_file():                    # a tracked file deleted in the work tree is not
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def new_user_env(workshop: Workshop) -> dict[str, str]:
    """A person's shell with the venv activated: a new HOME (no kernel cache), no API key, no
    GPU, nothing of this test run's (no KFORGE_*, PYTHON*, JUPYTER* or PYTEST_* variables)."""
    kept = {k: v for k, v in os.environ.items()
            if k in ("LANG", "LC_ALL", "TERM", "TMPDIR", "USER", "LOGNAME")
            or k.startswith("OPENBLAS_")}       # set for this CPU's OpenBLAS: keep as it is
    path = f"{workshop.venv / 'bin'}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
    return {**kept, "HOME": str(workshop.home), "PATH": path, "VIRTUAL_ENV": str(workshop.venv),
            "CUDA_VISIBLE_DEVICES": ""}


def run_all(workshop: Workshop, notebook: Path, into: Path) -> nbformat.NotebookNode:
    """`notebook` run top to bottom in the workshop venv, offline, from its own folder; the
    executed copy."""
    run([*OFFLINE, workshop.python, "run_and_save.py", "--into", str(into), str(notebook)],
        cwd=workshop.notebooks, env=new_user_env(workshop), timeout=3000)
    return nbformat.read(into / notebook.name, as_version=4)


def failures(nb: nbformat.NotebookNode) -> list[str]:
    """Every code cell that did not run or whose execution failed (run_and_save.py marks those:
    a refused %%kforge is an IPython UsageError, a stderr line and no error output), with its
    error's last lines."""
    found = []
    for k, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or not cell.source.strip():
            continue
        errors = [out for out in cell.outputs if out.output_type == "error"]
        if cell.execution_count is None:
            found.append(f"cell {k} did not run")
        elif errors:
            trace = ANSI.sub("", "\n".join(errors[0].get("traceback", [])[-4:]))
            found.append(f"cell {k}: {errors[0].ename}: {errors[0].evalue}\n{trace}")
        elif cell.metadata.get("failed"):
            found.append(f"cell {k}: {cell.metadata.failed}")
    return found


def printed(nb: nbformat.NotebookNode) -> str:
    return "\n".join(out.text for _, out in outputs(nb) if out.output_type == "stream")


@pytest.fixture(scope="module")
def workshop(tmp_path_factory):
    if not network_can_be_cut():
        pytest.skip("cannot run the notebooks offline here: `unshare --net` needs root (or "
                    "user namespaces) and iproute2's `ip`")
    root = tmp_path_factory.mktemp("workshop")
    source = copy_checkout(root / "kforge-nb")
    venv = root / "venv"
    run([sys.executable, "-m", "venv", str(venv)], timeout=600)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    # torch first, as binder/requirements.txt pins it: else pip resolves a multi-GB CUDA build
    run([*pip, binder_torch()], timeout=1800)
    run([*pip, f"{source}{binder_extra()}"], cwd=root, timeout=1800)
    (root / "home").mkdir()
    yield Workshop(venv, source / "notebooks", root / "home")
    shutil.rmtree(venv, ignore_errors=True)      # ~2 GB; pytest keeps its last 3 temp folders


PROBE = """
import json, os, socket, sys
import kforge_nb, torch
try:
    socket.create_connection(("pypi.org", 443), timeout=10).close()
    network = "reached pypi.org"
except OSError as err:
    network = f"none ({type(err).__name__})"
print(json.dumps({"prefix": sys.prefix, "kforge_nb": kforge_nb.__file__, "network": network,
                  "keys": sorted(k for k in os.environ if k.endswith("_API_KEY")),
                  "cuda": torch.cuda.is_available()}))
"""


def test_the_notebooks_kernel_is_the_fresh_venv_offline_with_no_key_and_no_gpu(workshop, tmp_path):
    folder = workshop.notebooks.parent / "probe"
    folder.mkdir(exist_ok=True)
    probe = folder / "probe.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(PROBE)]), probe)
    nb = run_all(workshop, probe, tmp_path)
    assert not failures(nb), "\n\n".join(failures(nb))
    seen = json.loads(printed(nb).strip().splitlines()[-1])
    assert Path(seen["prefix"]) == workshop.venv, seen
    # the installed package, not this checkout nor its copy: what a wheel holds
    assert Path(seen["kforge_nb"]).is_relative_to(workshop.venv), seen
    assert seen["network"].startswith("none") and not seen["keys"] and not seen["cuda"], seen


@pytest.mark.parametrize("name", [p.name for p in NOTEBOOKS])
def test_a_notebook_runs_top_to_bottom_in_the_workshop_venv(workshop, tmp_path, name):
    nb = run_all(workshop, workshop.notebooks / name, tmp_path)
    assert not failures(nb), f"{name}:\n\n" + "\n\n".join(failures(nb))


def test_without_triton_the_triton_notebook_says_what_is_missing_and_goes_on(workshop, tmp_path):
    """Triton is optional (the [lab] extra brings it only where PyPI has it): without it the
    Triton section says what is missing and how to get it, and every later cell still runs."""
    run([workshop.python, "-m", "pip", "uninstall", "--yes", "--quiet", "triton"], timeout=600)
    nb = run_all(workshop, workshop.notebooks / TRITON_NOTEBOOK, tmp_path)
    assert not failures(nb), "\n\n".join(failures(nb))
    said = printed(nb)
    assert "triton is not installed: pip install triton" in said, said[-3000:]
    assert "Triton section skipped" in said, said[-3000:]
    ran = [k for k, out in outputs(nb) if "on triton" in shown_text(out)]     # a run's header
    assert not ran, f"cells {ran} show a Triton run"
