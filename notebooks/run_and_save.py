"""Execute workshop notebooks headless and save them as JupyterLab would write them.

    .venv/bin/python notebooks/run_and_save.py notebooks/03_human_in_the_loop.ipynb [...]

Each notebook runs top to bottom in a fresh kernel (this environment's `python3`), in an empty
temporary folder (run folders go there, not next to the notebook), the way nbval and CI run
it. The file is then written in the form JupyterLab saves (nbformat 4.5, indent 1, sorted
keys, a trailing newline) with the kernelspec of the kernel that ran it, so opening it in
JupyterLab does not mark it modified (JupyterLab rewrites a kernelspec that differs from its
kernel's, e.g. "Python 3" for "Python 3 (ipykernel)"). tests/test_notebook_files.py checks
both, and that nothing was saved mid-run.
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient

KERNEL = "python3"


def kernelspec() -> dict:
    spec = KernelSpecManager().get_kernel_spec(KERNEL)
    return {"display_name": spec.display_name, "language": spec.language, "name": KERNEL}


def run_and_save(path: Path) -> float:
    """Execute `path` in place; the seconds it took."""
    nb = nbformat.read(path, as_version=4)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kforge-nb-") as cwd:
        NotebookClient(nb, timeout=1800, kernel_name=KERNEL, store_widget_state=True,
                       resources={"metadata": {"path": cwd}}).execute()
    nb.metadata["kernelspec"] = kernelspec()
    nbformat.write(nb, path)          # nbformat's layout: what JupyterLab's server writes too
    return time.monotonic() - started


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(f"{name}: executed and saved in {run_and_save(Path(name)):.0f} s", flush=True)
