"""Execute workshop notebooks headless and save them as JupyterLab would write them.

    .venv/bin/python notebooks/run_and_save.py notebooks/03_human_in_the_loop.ipynb [...]

Each notebook runs top to bottom in a fresh kernel (this environment's `python3`), in an empty
temporary folder (run folders go there, not next to the notebook), the way nbval and CI run
it. The file is then written in the form JupyterLab saves (nbformat 4.5, indent 1, sorted
keys, a trailing newline) with the kernelspec of the kernel that ran it, so opening it in
JupyterLab does not mark it modified (JupyterLab rewrites a kernelspec that differs from its
kernel's, e.g. "Python 3" for "Python 3 (ipykernel)"). tests/test_notebook_files.py checks
both, and that nothing was saved mid-run.

    python run_and_save.py --into DIR NOTEBOOK [...]

runs each notebook as a person's *Run All* does in JupyterLab, in its own folder (where its
kernel starts, so `data/` beside it is found), and writes the executed copy into DIR instead of
over the notebook; a cell that fails does not stop the cells after it, so the copy shows every
failure, each failed cell marked `failed` in its metadata (a refused magic, an IPython
UsageError, leaves no error output). tests/test_workshop_venv.py runs the notebooks so in a
fresh `kforge-nb[lab]` venv.
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
CELL_TIMEOUT_S = 1800     # a whole %%kforge run is one cell; a busy 2-core machine is slow


def kernelspec() -> dict:
    spec = KernelSpecManager().get_kernel_spec(KERNEL)
    return {"display_name": spec.display_name, "language": spec.language, "name": KERNEL}


def execute(nb: nbformat.NotebookNode, folder: Path, allow_errors: bool = False) -> None:
    """Run every cell of `nb` in place, in a fresh kernel started in `folder`."""
    NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name=KERNEL, store_widget_state=True,
                   allow_errors=allow_errors, on_cell_executed=keep_a_failed_reply,
                   resources={"metadata": {"path": str(folder)}}).execute()


def keep_a_failed_reply(cell, cell_index, execute_reply) -> None:
    """A cell whose execution failed says so in its metadata (`failed`): a refused magic (an
    IPython UsageError) prints to stderr and leaves no error output, yet stops Run All."""
    content = execute_reply.get("content", {})
    if content.get("status") == "error":
        cell.metadata["failed"] = f"{content.get('ename')}: {content.get('evalue')}"


def run_and_save(path: Path) -> float:
    """Execute `path` in place; the seconds it took."""
    nb = nbformat.read(path, as_version=4)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kforge-nb-") as cwd:
        execute(nb, Path(cwd))
    nb.metadata["kernelspec"] = kernelspec()
    nbformat.write(nb, path)          # nbformat's layout: what JupyterLab's server writes too
    return time.monotonic() - started


def run_into(path: Path, folder: Path) -> float:
    """Execute `path` from its own folder, every cell whatever an earlier one did, and write
    the executed copy to `folder`; the seconds it took."""
    nb = nbformat.read(path, as_version=4)
    started = time.monotonic()
    execute(nb, path.resolve().parent, allow_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / path.name)
    return time.monotonic() - started


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--into"]:
        into, names = Path(args[1]), args[2:]
        for name in names:
            print(f"{name}: executed into {into} in {run_into(Path(name), into):.0f} s",
                  flush=True)
    else:
        for name in args:
            print(f"{name}: executed and saved in {run_and_save(Path(name)):.0f} s", flush=True)
