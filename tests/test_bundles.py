"""The built front end is committed, so that installing kforge-nb needs no Node: the widget's
bundle (kforge_nb/ui/static/view.js, .css) and the prebuilt JupyterLab extension
(labextension/prebuilt/). These tests keep them honest: built from the TypeScript as it is now,
shipped in the package, and installed where JupyterLab looks.

After changing labextension/src or style: `cd labextension && npm ci && npm run build`, then
`pip install -e .` again (it copies the extension into share/jupyter/labextensions).
"""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
RECORD = ROOT / "kforge_nb" / "ui" / "static" / "build.json"
# what labextension/scripts/stamp.mjs hashes: keep the two lists alike
SOURCES = ["labextension/src", "labextension/style", "labextension/package.json",
           "labextension/package-lock.json", "labextension/tsconfig.json"]
OUTPUTS = ["kforge_nb/ui/static/view.js", "kforge_nb/ui/static/view.css",
           "labextension/prebuilt/package.json", "labextension/prebuilt/static"]
NAME = "kforge-nb-labextension"
REBUILD = "run `npm ci && npm run build` in labextension/ and commit what it writes"


def files(rel: str) -> list[str]:
    path = ROOT / rel
    if path.is_dir():
        return [f for child in sorted(path.iterdir()) for f in files(f"{rel}/{child.name}")]
    return [rel] if path.exists() else []


def digest(rel: str) -> str:
    text = (ROOT / rel).read_bytes().decode("latin-1").replace("\r\n", "\n")
    return hashlib.sha256(text.encode("latin-1")).hexdigest()


def sources_hash() -> str:
    h = hashlib.sha256()
    for rel in sorted(f for source in SOURCES for f in files(source)):
        h.update(f"{rel}\0{digest(rel)}\n".encode())
    return h.hexdigest()


def test_the_committed_bundles_were_built_from_the_current_sources():
    recorded = json.loads(RECORD.read_text())
    assert recorded["sources"] == sources_hash(), \
        f"labextension/src, style or package files changed since the bundles were built: {REBUILD}"
    built = {rel: digest(rel) for output in OUTPUTS for rel in files(output)}
    assert built == recorded["outputs"], \
        f"the built files differ from what the last build wrote (edited by hand, or a partial " \
        f"build): {REBUILD}"


def test_the_widget_loads_the_committed_bundle():
    from kforge_nb.ui.widget import RunWidget
    bundle = (ROOT / "kforge_nb/ui/static/view.js").read_text()
    assert str(RunWidget._esm) == bundle and "as default" in bundle   # the ESM entry
    # the view's own code: text only, never parsed as HTML (plotly.js, bundled with it, draws
    # its charts; what the view hands it is escaped: charts.ts plain)
    for source in (ROOT / "labextension" / "src").glob("*.ts"):
        assert ".innerHTML" not in source.read_text(), source
    assert str(RunWidget._css) == (ROOT / "kforge_nb/ui/static/view.css").read_text()


def test_a_wheel_ships_the_bundles_and_the_prebuilt_labextension(tmp_path):
    """What `pip install kforge-nb[lab]` unpacks: no Node, no second package."""
    try:
        import setuptools  # noqa: F401  (then no download: build with this environment's)
        isolation = ["--no-build-isolation"]
    except ImportError:
        isolation = []
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps",
                           *isolation, "-q", "-w", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheel = zipfile.ZipFile(next(tmp_path.glob("kforge_nb-*.whl")))
    names = set(wheel.namelist())
    assert {"kforge_nb/ui/static/view.js", "kforge_nb/ui/static/view.css"} <= names
    data = f"kforge_nb-0.1.0.data/data/share/jupyter/labextensions/{NAME}"
    shipped = {n[len(data) + 1:] for n in names if n.startswith(data + "/")}
    prebuilt = {rel[len("labextension/prebuilt/"):] for rel in files("labextension/prebuilt")}
    assert shipped == prebuilt | {"install.json"}
    entry = json.loads(wheel.read(f"{data}/package.json"))["jupyterlab"]["_build"]["load"]
    assert f"{data}/{entry}" in names


def test_the_installed_labextension_is_the_prebuilt_one_and_jupyterlab_lists_it():
    installed = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / NAME
    assert (installed / "package.json").is_file(), \
        f"no {installed}: install kforge-nb (`pip install -e .` copies it there too)"
    for rel in files("labextension/prebuilt"):
        copy = installed / rel[len("labextension/prebuilt/"):]
        assert copy.is_file() and copy.read_bytes() == (ROOT / rel).read_bytes(), \
            f"{copy} is not the prebuilt {rel}: `pip install -e .` again after a rebuild"
    jupyter = shutil.which("jupyter", path=str(Path(sys.executable).parent))
    if jupyter is None or subprocess.run([jupyter, "lab", "--version"],
                                         capture_output=True).returncode:
        pytest.skip("JupyterLab is not installed (pip install 'kforge-nb[lab]')")
    listed = subprocess.run([jupyter, "labextension", "list"], capture_output=True, text=True,
                            timeout=120)
    line = next((line for line in (listed.stdout + listed.stderr).splitlines()
                 if NAME in line), "")
    assert "enabled" in line and "OK" in line and "kforge-nb" in line.split("(")[-1], \
        listed.stdout + listed.stderr
