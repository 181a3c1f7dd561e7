"""The builtin agent's own bf16 / fp16 GEMM: a module whose only work is a 16-bit Linear.

Qwen2's fused qkv projection is one bf16 `nn.Linear` with a bias, then a split into q, k and v
and views: no pointwise work for a kernel, so the agent used to refuse it ("no elementwise or
reduction work left"). Its GEMMs now read bf16 / fp16 operands: each value is loaded as
float32 (exactly), the products are summed in float32 from the bias, and the sum is rounded
once to the 16-bit dtype at the store, as torch's bf16 addmm accumulates in fp32. The views
stay Python. The candidates are judged by the real evaluator at its strict bf16 / fp16
tolerance (C++ built by g++, Triton under its CPU interpreter).
"""
from __future__ import annotations

import pytest
import torch

from kforge_nb.result import CORRECT
from tests.test_builtin import generate, judge, problem
from tests.test_builtin_half_precision import candidate_module

QKV = "self.qkv = nn.Linear(a0, a1 + 2 * a2, bias=True, dtype=torch.{dtype})"
SPLIT = "q, k, v = self.qkv(x).split((a1, a2, a2), dim=-1)"
PROBLEMS = {
    # Qwen2's qkv projection, small: K past one 192-wide slice (two halves), N = 160 (a
    # partial tile of 64 columns), 40 rows (a partial tile of 4), laid out [heads, tokens, dim]
    "bf16_qkv_bias_split": problem(
        "q, k, v = self.qkv(x).split(self.sizes, dim=-1)\n"
        "heads = lambda t: t.view(x.shape[0], -1, 16).transpose(0, 1)\n"
        "return heads(q), heads(k), heads(v)",
        "[torch.randn(40, 200, dtype=torch.bfloat16)]",
        "self.sizes = (a1, a2, a2)\n" + QKV.format(dtype="bfloat16"), "[200, 96, 32]"),
    # batch and tokens folded into the GEMM's rows; K past two slices (192 each, then the rest)
    "bf16_batched_tokens_qkv": problem(
        "q, k, v = self.qkv(x).split(self.sizes, dim=-1)\nreturn q, k.contiguous(), v",
        "[torch.randn(2, 9, 420, dtype=torch.bfloat16)]",
        "self.sizes = (a1, a2, a2)\n" + QKV.format(dtype="bfloat16"), "[420, 64, 16]"),
    # fp16 (Phi-2's dtype), no bias, a chunk into two halves
    "fp16_linear_chunk": problem(
        "gate, up = self.fc(x).chunk(2, dim=-1)\nreturn gate, up",
        "[torch.randn(24, 80, dtype=torch.float16)]",
        "self.fc = nn.Linear(a0, a1, bias=False, dtype=torch.float16)", "[80, 96]"),
    # a Linear to one output (a score head): the matrix-vector body, bias added in float32
    "bf16_linear_to_one_output": problem(
        "return self.score(x).squeeze(-1)",
        "[torch.randn(33, 130, dtype=torch.bfloat16)]",
        "self.score = nn.Linear(a0, 1, dtype=torch.bfloat16)", "[130]"),
}


def judged(name: str, target: str, tmp_path):
    ref, generation = generate(PROBLEMS[name], target)
    assert generation.code is not None, generation.failure
    assert generation.kept_ops == [], generation.kept_ops       # no vendor GEMM left
    return generation, judge(ref, generation, target, tmp_path)


# the qkv module in the fast tier; the rest of the table is a sweep (slow)
CPP_TABLE = [name if name == "bf16_qkv_bias_split" else pytest.param(name, marks=pytest.mark.slow)
             for name in sorted(PROBLEMS)]


@pytest.mark.parametrize("name", CPP_TABLE)
def test_a_16_bit_linear_with_only_views_after_it_is_the_agents_cpp_gemm(name, tmp_path):
    generation, result = judged(name, "cpp", tmp_path)
    assert result.state == CORRECT, result.message
    # the operands' 16 bits go into the kernel; the views stay Python
    assert "const uint16_t*" in generation.code and "F.linear" not in generation.code
    assert generation.code.count('extern "C" void') == 1


@pytest.mark.slow     # the Triton interpreter runs the tiles as NumPy, one program at a time
@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_a_16_bit_linear_with_only_views_after_it_is_the_agents_triton_gemm(name, tmp_path):
    generation, result = judged(name, "triton", tmp_path)
    assert result.state == CORRECT, result.message
    assert "@triton.jit" in generation.code and "F.linear" not in generation.code


def qkv_and_exact_answer(dtype: torch.dtype):
    """The bf16 qkv module's candidate output and the product in float64 from the same
    16-bit values (the exact answer, before any rounding)."""
    _, generation = generate(PROBLEMS["bf16_qkv_bias_split"].replace("bfloat16", str(dtype)[6:]),
                             "cpp")
    namespace = candidate_module(generation.code)
    torch.manual_seed(0)
    model = namespace.ModelNew(200, 96, 32)
    x = torch.randn(40, 200, dtype=dtype)
    got = torch.cat([t.transpose(0, 1).reshape(40, -1) for t in model(x)], dim=-1)
    w, b = model.qkv.weight, model.qkv.bias
    exact = x.double() @ w.double().T + b.double()
    magnitude = x.double().abs() @ w.double().abs().T + b.double().abs()
    return got, exact, magnitude, model.qkv(x)


def spacing(value: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The distance between neighbouring numbers of `dtype` in each element's binade."""
    _, exponent = torch.frexp(value.abs())
    return torch.finfo(dtype).eps * torch.ldexp(torch.ones_like(value), exponent - 1)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_the_sum_is_float32_rounded_once_to_the_16_bit_dtype(dtype):
    """Every element is the exact sum rounded to nearest in the 16-bit dtype, up to the float32
    sum's own error (K products, each within 2**-24 of the running sum's magnitude): no
    16-bit rounding of a partial sum or of the product before the bias. torch's own addmm,
    which also sums in float32, is never more than one 16-bit step away."""
    got, exact, magnitude, torch_result = qkv_and_exact_answer(dtype)
    assert got.dtype == dtype
    float32_error = 200 * 2.0 ** -24 * magnitude
    assert ((got.double() - exact).abs() <= spacing(exact, dtype) / 2 + float32_error).all()
    step = spacing(torch.maximum(got.double().abs(), torch_result.double().abs()), dtype)
    assert ((got.double() - torch_result.double()).abs() <= step).all()
