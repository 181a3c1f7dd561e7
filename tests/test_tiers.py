"""The two tiers are real (tests/README.md): `pytest -m "not slow"` leaves out what takes
minutes (the notebooks, the browser, the workshop venv, the red team's tables, the GPU tests)
while the full run still holds all of it, and the map in tests/README.md names every test file,
finds every module of kforge_nb by its path, and gives each package a file the fast tier runs.

What `-m "not slow"` selects is read from pytest's own collection, in a subprocess of the real
command, with this module loaded as a plugin (`-p tests.test_tiers`) that writes down what was
selected, with its marks, and what was deselected. No timing is involved.
"""
from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.evaluator import REPO

REPORT = "KFORGE_TIERS_REPORT"       # where the plugin below writes, set only by collect()
PACKAGE = REPO / "kforge_nb"
MAP = REPO / "tests" / "README.md"
# What a person runs by name besides the packages: each needs a fast test of its own.
ENTRY_POINTS = ("cli.py", "magics.py")

# What takes minutes, by the place it lives: each must be in the full run and none in the fast tier.
SLOW_PLACES = {"the workshop notebooks (nbval)": "notebooks/",
               "the browser tests": "tests/browser/",
               "the red team's tables": "tests/adversarial/",
               "the fresh workshop venv": "tests/test_workshop_venv.py"}


# --- the plugin: hooks pytest calls in the subprocess (a test module's hooks are never called) --

def _write(kind: str, items) -> None:
    if path := os.environ.get(REPORT):
        with open(path, "a", encoding="utf-8") as out:
            for item in items:
                marks = sorted({mark.name for mark in item.iter_markers()})
                out.write(json.dumps({"kind": kind, "id": item.nodeid, "marks": marks}) + "\n")


def pytest_deselected(items):
    _write("deselected", items)


def pytest_collection_finish(session):
    _write("selected", session.items)


# --- the tests -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fast_tier(tmp_path_factory) -> dict[str, list[dict]]:
    """{"selected": [...], "deselected": [...]} of `pytest -m "not slow"` run as the README says,
    from the repository's root with pyproject's testpaths (tests/ and notebooks/)."""
    report = tmp_path_factory.mktemp("tiers") / "collected.jsonl"
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PYTEST_", "COV_"))}   # this run's xdist worker, its addopts
    env[REPORT] = str(report)
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "not slow",
                          "-p", "tests.test_tiers"], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rows = [json.loads(line) for line in report.read_text(encoding="utf-8").splitlines()]
    return {kind: [row for row in rows if row["kind"] == kind]
            for kind in ("selected", "deselected")}


def test_the_fast_tier_leaves_out_the_notebooks_the_browser_and_the_workshop_venv(fast_tier):
    for what, place in SLOW_PLACES.items():
        assert any(row["id"].startswith(place) for row in fast_tier["deselected"]), \
            f"{what} ({place}) are not in the full run, or not marked slow"
        selected = [row["id"] for row in fast_tier["selected"] if row["id"].startswith(place)]
        assert not selected, f"{what} are in the fast tier: {selected[:5]}"


def test_every_gpu_test_is_slow(fast_tier):
    assert any("gpu" in row["marks"] for row in fast_tier["deselected"])
    in_fast_tier = [row["id"] for row in fast_tier["selected"] if "gpu" in row["marks"]]
    assert not in_fast_tier, f"gpu tests not marked slow: {in_fast_tier}"


def test_the_fast_tier_judges_candidates_for_real(fast_tier):
    """Not an empty tier: the evaluator's own verdicts (real g++, real workers) are in it."""
    files = {row["id"].split("::")[0] for row in fast_tier["selected"]}
    assert {"tests/test_compile_failures.py", "tests/test_mismatches.py",
            "tests/test_stats.py"} <= files, sorted(files)


def test_the_map_names_every_test_file():
    """tests/README.md names each test file, or the folder it lies in (`adversarial/`)."""
    tests = REPO / "tests"
    text = (tests / "README.md").read_text(encoding="utf-8")
    def named(path: Path) -> bool:
        folder = path.parent.name + "/" if path.parent != Path(".") else None
        return str(path) in text or bool(folder and folder in text)
    unnamed = [str(path) for path in sorted(p.relative_to(tests) for p in tests.rglob("test_*.py"))
               if not named(path)]
    assert not unnamed, f"add these to the map in tests/README.md: {unnamed}"


# --- the map: tests/README.md's table of module -> test files ----------------------------------

def map_rows() -> list[tuple[set[str], set[str]]]:
    """(module paths, test files) of each row: the backticked names in its first and second cell.
    A module is a path under kforge_nb/ (`session/`, `evaluator/sandbox/`); a test file is a
    path under tests/ (`test_cli.py`, `adversarial/test_sandbox.py`)."""
    rows = []
    for line in MAP.read_text(encoding="utf-8").splitlines():
        cells = line.split("|")
        if len(cells) >= 4 and "`" in cells[1]:
            named = [set(re.findall(r"`([^`]+)`", cell)) for cell in cells[1:3]]
            rows.append((named[0], named[1]))
    return rows


def covers(name: str, module: str) -> bool:
    """Does a map name find this module (its path under kforge_nb/): itself, a folder above it,
    or a pattern (`evaluator/worker/*.py`)?"""
    return module.startswith(name) if name.endswith("/") else fnmatch.fnmatch(module, name)


def test_the_map_finds_every_module_by_its_path():
    """A newcomer holding a module's path (`evaluator/worker/trial_values.py`) finds its row: the
    map names each module of kforge_nb, or a folder it lies in, by its path under kforge_nb/."""
    names = set().union(*(modules for modules, _ in map_rows()))
    modules = sorted(str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
                     if path.name != "__init__.py")
    unfound = [module for module in modules if not any(covers(name, module) for name in names)]
    assert not unfound, f"name these in the map in tests/README.md, by their path: {unfound}"


def test_every_package_has_a_test_file_in_the_fast_tier(fast_tier):
    """Each package of kforge_nb (and the CLI, the magic) has a row in the map with a test file
    that `-m "not slow"` runs: a person changing one module has a quick test to run."""
    fast_files = {row["id"].split("::")[0].removeprefix("tests/") for row in fast_tier["selected"]}
    packages = [path.name + "/" for path in sorted(PACKAGE.iterdir())
                if (path / "__init__.py").is_file()]
    rows = map_rows()
    without = [unit for unit in [*packages, *ENTRY_POINTS]
               if not any(files & fast_files for modules, files in rows
                          if any(name.startswith(unit) for name in modules))]
    assert packages and not without, f"no test file in the fast tier for: {without}"
