"""Fixtures for the evaluator's spec: real problems, real candidates, real child processes.

Problems live in tests/problems/, candidates in tests/candidates/ (each file's docstring says
what is wrong with it). Nothing is mocked: candidates are compiled by g++/nvcc/Triton and run in
the evaluator's worker processes.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.evaluator import REPO, candidate_source, load_problem


@pytest.fixture(scope="session", autouse=True)
def kforge_cache(tmp_path_factory):
    """One cache for the whole run (compiled kernels, reference data, CPU peaks), never
    ~/.cache. Set before any test starts the fork server, which inherits it."""
    with pytest.MonkeyPatch.context() as mp:
        cache = tmp_path_factory.mktemp("kforge-cache")
        mp.setenv("KFORGE_CACHE", str(cache))
        yield cache


@pytest.fixture
def options(tmp_path):
    """Fast evaluation options: no torch.compile baseline (~30 s here), a short timing loop."""
    from kforge_nb.evaluator import EvalOptions

    def make(**overrides):
        settings = {"baselines": ("eager",), "out_dir": tmp_path / "runs",
                    "timing_budget_s": 0.2, **overrides}
        return EvalOptions(**settings)
    return make


@pytest.fixture
def judge(options):
    """judge(problem, candidate, target="cpp", **EvalOptions fields) -> Result."""
    from kforge_nb.evaluator import evaluate

    def run(problem: str, candidate: str, target: str = "cpp", **overrides):
        return evaluate(load_problem(problem), candidate_source(candidate), target,
                        options(**overrides))
    return run


@pytest.fixture
def kforge_cli(tmp_path):
    """Run `python -m kforge_nb.cli ARGS...` as a real subprocess in a scratch folder."""
    def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path}
        return subprocess.run([sys.executable, "-m", "kforge_nb.cli", *args], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=timeout)
    return run


@pytest.fixture
def kforge_main(tmp_path, monkeypatch, capsys):
    """Run `kforge ARGS...` as `kforge_nb.cli.main(ARGS)` in this process, in a scratch folder:
    its exit status, stdout and stderr as kforge_cli returns them. For what the CLI says (usage
    errors, a verdict's JSON), where a fresh interpreter would only import torch again (~3 s of
    a core each); kforge_cli where the process itself is the point (stdout holding nothing but
    the JSON while C++ prints, a signal, a run left behind)."""
    from kforge_nb.cli import main

    def run(*args: str) -> subprocess.CompletedProcess:
        monkeypatch.chdir(tmp_path)
        capsys.readouterr()                     # only what this command says
        try:
            code = main(list(args))
        except SystemExit as exited:            # argparse's own usage errors
            code = exited.code
        said = capsys.readouterr()
        return subprocess.CompletedProcess(["kforge", *args], code, said.out, said.err)
    return run


ADVERSARIAL = REPO / "tests" / "adversarial"


@pytest.hookimpl(tryfirst=True)     # before `-m` deselects, so `-m "not slow"` leaves them out
def pytest_collection_modifyitems(items):
    """Two places are `slow` as a whole, so they are marked here rather than file by file:
    - the workshop notebooks' cells (collected by nbval from notebooks/, see pyproject's
      testpaths): each notebook runs a real kernel top to bottom, its sessions judged by the
      evaluator, and a notebook cannot carry a mark of its own;
    - the red team's tables in tests/adversarial/: hundreds of candidates, each judged by the
      real evaluator, and each new round adds a file."""
    for item in items:
        if item.path.suffix == ".ipynb" or ADVERSARIAL in item.path.parents:
            item.add_marker(pytest.mark.slow)
