"""The jobs the two workers start with: the judge's (the reference, never candidate code) and the
candidate's (its source, the target, and the sandbox the parent planned for it)."""
from __future__ import annotations

import ast
import os
from pathlib import Path

from ...problem import Problem
from ...pyparse import parse_ast
from ...targets import Target
from ...targets.triton import cuda_present
from ..sandbox import layout
from .options import EvalOptions


def reference_job(problem: Problem, options: EvalOptions, folder: Path, device: str) -> dict:
    return {"problem_source": problem.source, "problem_label": problem.label,
            "device": device, "init_seed": options.seed,
            "precision": "strict",               # the reference is always full fp32
            "policy": options.precision,         # what the comparison tolerates
            "memory_bytes": options.memory_bytes,
            "weights": str(folder / "weights.pt"),   # the candidate reads it
            "log": str(folder / "reference.log"),
            # the fork server warms torch.compile once before the first such judge (zygote.py);
            # never where a GPU is: Inductor's start-up initialises CUDA, and no worker forked
            # after it could use CUDA again ("Cannot re-initialize CUDA in forked subprocess")
            # (asked here, in the parent, never in the fork server)
            "warm_compile": "compile" in options.baselines and not cuda_present(),
            "compile_mode": options.compile_mode}


def candidate_job(problem: Problem, candidate: str, target: Target, options: EvalOptions,
                  folder: Path, device: str, compile_only: bool) -> dict:
    allowed = list(options.guardrails.allow)
    return {"source": candidate, "filename": str(folder / "candidate.py"), "target": target.name,
            "problem_source": problem.source, "problem_label": problem.label,
            "device": device, "compile_only": compile_only, "init_seed": options.seed,
            "precision": options.precision, "allowed_ops": allowed,
            "env": target.worker_env(), "log": str(folder / "worker.log"),
            "sandbox": layout.plan(folder, options.sandbox, candidate, options.memory_bytes,
                                    data_files(problem.source))}


def data_files(source: str) -> list[str]:
    """Files the problem's source names by absolute path (a notebook's inputs saved by
    `%%kforge --inputs`): the candidate's worker draws inputs with the problem's code, so its
    sandbox shows them, read-only."""
    try:
        tree = parse_ast(source)
    except SyntaxError:
        return []
    return sorted({n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and
                   isinstance(n.value, str) and n.value.startswith("/") and
                   len(n.value) < 4096 and "\n" not in n.value and os.path.isfile(n.value)})
