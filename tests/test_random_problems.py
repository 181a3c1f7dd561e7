"""The seeded generator of unseen problems: same seed, same files; every problem is valid
KernelBench form, its reference runs and gives finite outputs, and the builtin agent lowers it."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

from kforge_nb.agents.base import GenerationRequest
from kforge_nb.agents.builtin import BuiltinGenerator
from kforge_nb.problem import Problem

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from random_problems import write_draw  # noqa: E402


def test_a_seed_gives_the_same_draw_and_another_seed_a_different_one(tmp_path):
    first = [p.read_text() for p in write_draw(tmp_path / "a", seed=11, count=8)]
    again = [p.read_text() for p in write_draw(tmp_path / "b", seed=11, count=8)]
    other = [p.read_text() for p in write_draw(tmp_path / "c", seed=12, count=8)]
    assert first == again and first != other


def test_every_problem_is_valid_runs_and_is_lowered(tmp_path):
    for path in write_draw(tmp_path, seed=3, count=12):
        problem = Problem.from_file(path)          # static checks of KernelBench form
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        model = module.Model(*module.get_init_inputs())
        with torch.no_grad():
            out = model(*module.get_inputs())
        assert torch.isfinite(out).all(), path.name
        generation = BuiltinGenerator().generate(GenerationRequest(problem, "cpp", "initial"))
        assert generation.code is not None, (path.name, generation.failure)
