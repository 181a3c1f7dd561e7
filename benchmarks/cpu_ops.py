"""One row per op the builtin agent's capture accepts: its C++ kernel against eager, on this CPU.

    PYTHONPATH=. python benchmarks/cpu_ops.py [--rows 4096] [--cols 1024] [--markdown]

For each op, the problem is `y = op(x)` (a few ops take a parameter); the builtin agent writes
its first C++ candidate, the evaluator judges it against eager (paired ratios, medians), and the
candidate's C++ is compiled to assembly to list what its loops call: "none" means no libm or
helper call runs inside a hot loop (only the OpenMP runtime is called, outside the loops).
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kforge_nb.agents.base import GenerationRequest  # noqa: E402
from kforge_nb.agents.builtin import BuiltinGenerator  # noqa: E402
from kforge_nb.evaluator import EvalOptions, Guardrails, evaluate  # noqa: E402
from kforge_nb.problem import Problem  # noqa: E402
from kforge_nb.runtime.cpp import FLAGS  # noqa: E402

OPS = {
    "relu": "torch.relu(x)", "sigmoid": "torch.sigmoid(x)", "tanh": "torch.tanh(x)",
    "exp": "torch.exp(x)", "log": "torch.log(x.abs() + 1e-3)", "log1p": "torch.log1p(x.abs())",
    "expm1": "torch.expm1(x)", "sqrt": "torch.sqrt(x.abs())", "rsqrt": "torch.rsqrt(x.abs() + 1e-3)",
    "erf": "torch.erf(x)", "sin": "torch.sin(x)", "cos": "torch.cos(x)",
    "gelu": "F.gelu(x)", "gelu_tanh": "F.gelu(x, approximate='tanh')", "silu": "F.silu(x)",
    "mish": "F.mish(x)", "softplus": "F.softplus(x)", "elu": "F.elu(x)", "selu": "torch.selu(x)",
    "celu": "F.celu(x, alpha=0.5)", "leaky_relu": "F.leaky_relu(x, 0.1)",
    "hardtanh": "F.hardtanh(x)", "hardswish": "F.hardswish(x)",
    "hardsigmoid": "F.hardsigmoid(x)", "clamp": "torch.clamp(x, -0.5, 0.5)",
    "pow_2.5": "torch.pow(x.abs(), 2.5)", "pow_3": "torch.pow(x, 3)",
    "pow_tensor": "torch.pow(x.abs() + 0.5, x)", "reciprocal": "torch.reciprocal(x)",
    "sign": "torch.sign(x)", "floor": "torch.floor(x * 4.0)", "abs": "torch.abs(x)",
}
PROBLEM = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x):
        return {expr}


def get_inputs():
    return [torch.randn({rows}, {cols})]


def get_init_inputs():
    return []
'''


def loop_calls(code: str) -> list[str]:
    """Functions the candidate's kernels call, the OpenMP runtime aside."""
    source = code.split('source = r"""', 1)[1].split('"""', 1)[0]
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "k.cpp").write_text(source)
        flags = [f for f in FLAGS if f not in ("-shared", "-fPIC")]
        subprocess.run(["g++", *flags, "-S", "k.cpp", "-o", "k.s"], cwd=folder, check=True)
        assembly = (Path(folder) / "k.s").read_text()
    calls = set(re.findall(r"\bcall\s+(\S+)", assembly))
    return sorted(c for c in calls if not re.match(r"(GOMP_|omp_|__stack_chk)", c))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=1024)
    parser.add_argument("--only", help="regex on op names")
    args = parser.parse_args()
    print(f"| op | eager ms | kernel ms | x eager | calls in the kernels |")
    print("|---|---:|---:|---:|---|")
    out = Path(tempfile.mkdtemp(prefix="kforge-cpu-ops-"))
    for name, expr in OPS.items():
        if args.only and not re.search(args.only, name):
            continue
        problem = Problem.from_string(PROBLEM.format(expr=expr, rows=args.rows, cols=args.cols),
                                      name=f"op_{name}")
        generation = BuiltinGenerator().generate(GenerationRequest(problem, "cpp", "initial"))
        if generation.code is None:
            print(f"| {name} | - | - | - | not lowered: {generation.failure} |", flush=True)
            continue
        result = evaluate(problem, generation.code, "cpp", EvalOptions(
            baselines=("eager",), out_dir=out / name,
            guardrails=Guardrails(allow=generation.kept_ops)))
        t = result.timing
        if result.state != "correct":
            print(f"| {name} | - | - | - | {result.state}: {result.message[:80]} |", flush=True)
            continue
        calls = ", ".join(loop_calls(generation.code)) or "none"
        print(f"| {name} | {t.eager_ms:.3f} | {t.candidate_ms:.3f} | {t.speedup_vs_eager:.2f} "
              f"| {calls} |", flush=True)


if __name__ == "__main__":
    main()
