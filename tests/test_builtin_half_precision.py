"""The builtin agent on bf16 and fp16 modules: their pointwise work is lowered, rounded as torch's.

torch computes a bf16 / fp16 pointwise op in float32 and rounds the result to the storage dtype
after each op (one fused ATen kernel such as gelu or silu rounds once). The agent's kernels
load bf16 / fp16 values as float32, round each op's result at the same points and store the
16 bits: the serving modules below (a GEMM's gelu epilogue, a SwiGLU gate, an RMSNorm times
its weight) are judged `correct` by the real evaluator at its strict bf16 / fp16 tolerance,
where the agent used to leave that work in torch ("no elementwise work left", or a candidate
the guardrail rejected for its `weight * h`).
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import types

import pytest
import torch

from kforge_nb.result import CORRECT
from tests.test_builtin import generate, judge, problem

PROBLEMS = {
    # Phi-2 / GPT-style up-projection: the vendor's bf16 GEMM, its bias-free output's GELU
    # (tanh form) and a bf16 bias add in the agent's kernel
    "bf16_linear_gelu": problem(
        "return F.gelu(self.fc(x), approximate='tanh') + self.bias",
        "[torch.randn(32, 64, dtype=torch.bfloat16)]",
        "self.fc = nn.Linear(a0, a1, bias=False, dtype=torch.bfloat16)\n"
        "self.bias = nn.Parameter(0.1 * torch.randn(a1).to(torch.bfloat16))", "[64, 48]"),
    # SwiGLU's gate in fp16: silu (one fused op, one rounding) times the up half
    "fp16_gate_multiply": problem(
        "gate, up = x.chunk(2, dim=-1)\nreturn F.silu(gate) * up",
        "[torch.randn(16, 2 * 96, dtype=torch.float16)]"),
    # Llama's RMSNorm: bf16 in, the norm in float32, rounded to bf16, times the bf16 weight
    "bf16_rmsnorm_weight": problem(
        "h = x.to(torch.float32)\n"
        "h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5)\n"
        "return self.weight * h.to(torch.bfloat16)",
        "[torch.randn(16, 96, dtype=torch.bfloat16)]",
        "self.weight = nn.Parameter(torch.ones(a0, dtype=torch.bfloat16) + "
        "0.1 * torch.randn(a0).to(torch.bfloat16))", "[96]"),
}
# rounds after every op: (x * 3 + y) * z in bf16 differs from the same sums rounded once
CHAIN = problem("return ((x * 3.0 + y) * z - y) * 0.5",
                "[torch.randn(64, 130, dtype=torch.bfloat16), "
                "torch.randn(64, 130, dtype=torch.bfloat16), "
                "torch.randn(64, 130, dtype=torch.bfloat16)]", signature="x, y, z")


def candidate_module(code: str) -> types.ModuleType:
    module = types.ModuleType("candidate")
    exec(compile(code, "candidate.py", "exec"), module.__dict__)
    return module


@pytest.mark.slow     # each problem judged by the evaluator on both targets
@pytest.mark.parametrize("target", ["cpp", "triton"])
@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_the_half_precision_module_is_correct_with_its_pointwise_work_in_kernels(
        name, target, tmp_path):
    ref, generation = generate(PROBLEMS[name], target)
    assert generation.code is not None, generation.failure
    # what stays in torch is the vendor GEMM and the chunk's views: no arithmetic, no cast
    assert not {"mul", "add", "gelu", "silu", "Tensor.to", "rsqrt"} & set(generation.kept_ops), \
        generation.kept_ops
    result = judge(ref, generation, target, tmp_path)
    assert result.state == CORRECT, result.message


def test_the_rmsnorm_is_one_kernel_from_the_bf16_input_to_the_bf16_output():
    """The casts are loads and stores: one kernel reads the bf16 bits and writes them."""
    _, generation = generate(PROBLEMS["bf16_rmsnorm_weight"], "cpp")
    assert generation.code.count('extern "C" void') == 1
    assert "const uint16_t* x" in generation.code and "bf16_round(" in generation.code
    assert generation.kept_ops == []


def test_a_bf16_chain_is_bit_identical_to_torch_on_the_cpu():
    """Rounded after each op, as torch: every element equal, where rounding once at the end
    would differ from torch on many of them."""
    _, generation = generate(CHAIN, "cpp")
    model = candidate_module(generation.code).ModelNew()
    torch.manual_seed(0)
    x, y, z = (torch.randn(64, 130, dtype=torch.bfloat16) for _ in range(3))
    expected = ((x * 3.0 + y) * z - y) * 0.5
    got = model(x, y, z)
    assert got.dtype == torch.bfloat16 and torch.equal(got, expected)
    x32, y32, z32 = x.float(), y.float(), z.float()
    rounded_once = (((x32 * 3.0 + y32) * z32 - y32) * 0.5).bfloat16()
    assert (rounded_once != expected).sum() > 100


# halfway between two bf16 (then fp16) numbers both ways, fp16's overflow, NaN, infinities, a
# bf16 near its largest and a float32 subnormal, each converted by the candidate and by torch
CONVERSIONS = textwrap.dedent("""
    import importlib.util, sys, torch
    spec = importlib.util.spec_from_file_location("candidate", sys.argv[1])
    candidate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(candidate)
    x = torch.tensor([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, -(1.0 + 2 ** -8), 1.0 + 2 ** -11,
                      1.0 + 3 * 2 ** -11, 65520.0, float("inf"), float("-inf"), float("nan"),
                      3.0e38, 1e-40])
    bf16, fp16 = candidate.ModelNew()(x)
    same = lambda a, b: torch.equal(a.float().nan_to_num(7.0), b.float().nan_to_num(7.0))
    print(bf16.dtype, fp16.dtype, same(bf16, x.bfloat16()), same(fp16, x.half()))
""")


@pytest.mark.parametrize("target", ["cpp", "triton"])
def test_bf16_and_fp16_round_to_nearest_even_as_torch(target, tmp_path):
    """The conversions themselves, against torch's own `.to(dtype)` (Triton under its
    interpreter, where `.to(tl.bfloat16)` would truncate)."""
    source = problem("return x.to(torch.bfloat16), x.to(torch.float16)", "[torch.randn(11)]")
    _, generation = generate(source, target)
    (tmp_path / "candidate.py").write_text(generation.code)
    run = subprocess.run([sys.executable, "-c", CONVERSIONS, str(tmp_path / "candidate.py")],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "TRITON_INTERPRET": "1"})
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["torch.bfloat16", "torch.float16", "True", "True"]


def test_a_division_before_a_conversion_torch_keeps_is_torch_division():
    """fp8 per-token quantisation: x / scale meets the fp8 cast torch keeps, where a last-bit
    difference in the quotient is a whole fp8 step. The C++ divides (no per-row reciprocal
    multiplied in), as it does before a rounding."""
    source = problem("amax = x.abs().amax(dim=-1, keepdim=True).float().clamp(min=1e-12)\n"
                     "scale = amax / 448.0\n"
                     "q = (x.float() / scale).clamp(-448.0, 448.0)\n"
                     "return (q.to(torch.float8_e4m3fn).float() * scale).to(torch.bfloat16)",
                     "[torch.randn(16, 64, dtype=torch.bfloat16)]")
    _, generation = generate(source, "cpp")
    assert generation.kept_ops == ["Tensor.to"], generation.kept_ops     # the fp8 cast only
    assert "_inv" not in generation.code
