"""A small suite in KernelBench layout, with candidates, for the bench's tests.

    problems/level1/1_relu.py          candidate cands/level1/1_relu.py          correct
    problems/level1/2_relu_again.py    candidate cands/2_relu_again.py           mismatch
    problems/level2/3_relu_bias.py     cands/level_2_problem_3_sample_0_kernel.py correct
    problems/level2/4_relu_alone.py    no candidate                              no_candidate
"""
from __future__ import annotations

import shutil
from pathlib import Path

from .evaluator import CANDIDATES

RELU = '''"""ReLU at a size that judges in a moment."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x){extra}


def get_inputs():
    return [torch.randn(32, 256)]


def get_init_inputs():
    return []
'''

# a candidate that waits for a file before it answers: a worker can be killed while it judges.
# The sandbox shows it no folder of the test's: the flag lies in the one cache folder it sees,
# its own (one per candidate text, see evaluator/sandbox/layout.py source_cache)
WAITS = '''"""ReLU in torch (run with --allow '*') that waits for a flag file in its own cache
before its first answer."""
import os
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        while not os.path.exists(os.path.join(os.environ["KFORGE_CACHE"], "go")):
            time.sleep(0.05)
        return torch.relu(x)
'''


def waiting_flag() -> Path:
    """The file the waiting candidate's sandbox sees as $KFORGE_CACHE/go (none yet)."""
    from kforge_nb.evaluator.sandbox.layout import source_cache
    flag = source_cache(Path(), WAITS) / "go"
    flag.parent.mkdir(parents=True, exist_ok=True)
    flag.unlink(missing_ok=True)
    return flag

EXPECTED = {"level1/1_relu": "correct", "level1/2_relu_again": "mismatch",
            "level2/3_relu_bias": "correct", "level2/4_relu_alone": "no_candidate"}


def write_suite(root: Path) -> tuple[Path, Path]:
    problems, cands = root / "problems", root / "cands"
    for rel in ("level1/1_relu", "level1/2_relu_again", "level2/3_relu_bias",
                "level2/4_relu_alone"):
        path = problems / f"{rel}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(RELU.format(extra=" + 0.0" if "bias" in rel else ""))
    (cands / "level1").mkdir(parents=True)
    shutil.copy(CANDIDATES / "cpp_relu.py", cands / "level1" / "1_relu.py")
    shutil.copy(CANDIDATES / "cpp_relu_off_by_1e3.py", cands / "2_relu_again.py")
    shutil.copy(CANDIDATES / "cpp_relu.py", cands / "level_2_problem_3_sample_0_kernel.py")
    return problems, cands


def add_waiting_problem(problems: Path, cands: Path) -> str:
    """A fifth problem whose candidate waits for `waiting_flag()`; returns its id."""
    (problems / "level2" / "5_relu_waits.py").write_text(RELU.format(extra=""))
    (cands / "level2").mkdir(exist_ok=True)
    (cands / "level2" / "5_relu_waits.py").write_text(WAITS)
    return "level2/5_relu_waits"
