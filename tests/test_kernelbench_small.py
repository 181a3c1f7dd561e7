"""The KernelBench measuring harness (benchmarks/kernelbench_*.py) on problems written here in
KernelBench's form: sizes shrunk without changing the op, the builtin agent's candidates judged
by the real evaluator, and the GPU runner's bench resumed and packed (Triton's interpreter)."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
from kernelbench_classes import drawn, op_class  # noqa: E402
from kernelbench_shrink import find_shrink, shrink_int, shrunk_source  # noqa: E402

GROUPED = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, groups, num_groups):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride,
                              groups=groups)
        self.norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        return self.norm(self.conv(x))

batch_size = 64
in_channels = 96
out_channels = 192
kernel_size = (3, 5)
stride = 2
groups = 3
num_groups = 8
height = width = 257
M = 256 * 8

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, groups, num_groups]
'''

RELU = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)

batch_size = 4096
dim = 393215

def get_inputs():
    return [torch.rand(batch_size, dim)]

def get_init_inputs():
    return []
'''


def constants(source: str) -> dict:
    """The module-level constants of a problem's source, evaluated in order."""
    space: dict = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign):
            exec(compile(ast.Module([node], []), "<sizes>", "exec"), space)
    return {k: v for k, v in space.items() if k != "__builtins__"}


def test_a_shrink_keeps_the_op_and_what_divides_the_sizes():
    source, changed = shrunk_source(GROUPED, 8)
    sizes = constants(source)
    assert (sizes["kernel_size"], sizes["stride"], sizes["groups"], sizes["num_groups"]) == \
        ((3, 5), 2, 3, 8)                                   # what defines the op
    assert sizes["batch_size"] == 8 and sizes["M"] == 256 and sizes["height"] < 257
    assert sizes["height"] % 2 == 1 == sizes["width"] % 2   # odd sizes stay odd
    assert sizes["in_channels"] % 3 == 0 and sizes["out_channels"] % (3 * 8) == 0
    assert sizes["out_channels"] < 192 and "kernel_size" not in changed
    assert shrink_int(4, 100, []) == 4 and shrink_int(7, 100, []) == 3   # axes kept; odd, >= 2
    assert shrink_int(4096, 1000, [64]) == 128 and shrink_int(96, 1000, [96]) == 96  # per group:
    #                                            two where there were two or more, else one


def test_the_largest_shrink_within_the_budget_is_kept_and_runs():
    found = find_shrink(RELU, max_elements=1 << 14, max_seconds=1.0)
    assert found["within_budget"] and found["elements"] <= 1 << 14
    batch, dim = found["changed"]["batch_size"][1], found["changed"]["dim"][1]
    assert dim % 2 == 1 and 2 * batch * dim > (1 << 14) / 4      # not shrunk further than asked


def test_op_classes_and_a_seeded_draw():
    assert op_class("level1/57_conv_transposed_2D__square_input__square_kernel") == \
        "conv_transpose"
    assert [op_class(f"level1/{n}") for n in ("86_conv_depthwise_separable_2D",
                                              "45_Average_Pooling_2D", "96_HuberLoss",
                                              "23_Softmax", "51_Argmax_over_a_dimension",
                                              "90_cumprod", "4_Matrix_vector_multiplication_",
                                              "19_ReLU")] == \
        ["conv", "pool", "loss", "norm", "reduction", "scan", "matmul", "pointwise"]
    assert op_class("level2/84_Gemm_BatchNorm_Scaling_Softmax") == "level2 fusion"
    names = [f"level1/{i}_x" for i in range(50)]
    assert drawn(names, 10, 1) == drawn(list(reversed(names)), 10, 1) != drawn(names, 10, 2)


def run(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRITON_INTERPRET": "1"}
    return subprocess.run([sys.executable, str(REPO / "benchmarks" / script), *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=600)


def kernelbench(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    (root / "level1").mkdir(parents=True)
    (root / "level1" / "19_ReLU.py").write_text(RELU)
    return root


@pytest.mark.slow
def test_the_cpu_harness_judges_a_shrunk_problem_and_resumes(tmp_path):
    root, out = kernelbench(tmp_path), tmp_path / "small"
    args = [str(root), "--levels", "1", "--target", "triton", "--out", str(out)]
    first = run("kernelbench_small.py", *args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["problem"], r["target"], r["state"]) for r in rows] == \
        [("level1/19_ReLU", "triton", "correct")]
    assert rows[0]["within_budget"] and (out / "shrunk" / "level1" / "19_ReLU.py").is_file()
    assert "| pointwise | 1 | 1/1 | 0 | 0 |" in first.stdout
    again = run("kernelbench_small.py", *args, cwd=tmp_path)
    assert "0 to run (1 done" in again.stdout
    assert len((out / "results.jsonl").read_text().splitlines()) == 1


@pytest.mark.slow
def test_the_gpu_runner_resumes_its_bench_and_packs_it(tmp_path):
    """On the CPU: Triton's interpreter, one iteration, no torch.compile baseline."""
    root = kernelbench(tmp_path)
    (root / "level1" / "19_ReLU.py").write_text(RELU.replace("4096", "8").replace("393215",
                                                                                  "1001"))
    args = [str(root), "--results", str(tmp_path / "res"), "--iterations", "1", "--trials", "1",
            "--pack", str(tmp_path / "out" / "kb-gpu.tar.gz"), "--table", "--",
            "--no-compile-baseline"]
    first = run("kernelbench_gpu.py", *args, cwd=tmp_path)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    assert "1/1 problems finished (1 correct)" in first.stdout
    assert "| pointwise | 1/1 | 100% |" in first.stdout
    with tarfile.open(tmp_path / "out" / "kb-gpu.tar.gz") as tar:
        names = tar.getnames()
    assert "bench-kb-triton-builtin/results.jsonl" in names
    assert any(n.endswith("best_candidate.py") for n in names)
    moved = tmp_path / "elsewhere" / "kb"          # the repo at another path: the same bench
    moved.parent.mkdir()
    root.rename(moved)
    again = run("kernelbench_gpu.py", str(moved), *args[1:], cwd=tmp_path)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert "1 finished earlier" in again.stdout
