"""The builtin agent rounds where torch rounds: quantisation kernels agree with torch to the step.

`round(x / scale)` moves a whole quantisation step where the quotient moves by its last bit.
The problems here draw values on the ties (k + 1/2 steps), so the quotient's last bit decides
thousands of them per draw: each first kernel must divide as torch divides (a true division by
a tensor, torch's reciprocal-times-number for `448 / amax`, a Python number as torch divides by
one on the device) and round half to even. Each arithmetic the agent wrote before is checked to
flip steps on the same inputs (`test_the_old_arithmetic_flips_steps_on_these_inputs`), so the
`correct` verdicts below are not luck of the draw.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from kforge_nb.result import CORRECT
from tests.test_builtin import generate, judge, problem

# values on the ties of a per-row scale: row r is (k + 1/2) * s_r, its first element 127 * s_r
TIES = ("steps = torch.randint(-126, 126, (64, 256)).float() + 0.5\n"
        "s = torch.rand(64, 1) * 0.05 + 0.001\n"
        "x = steps * s\n"
        "x[:, :1] = 127.0 * s\n")

PROBLEMS = {
    # per-row int8: scale = amax / 127 (a tensor by a number), then x / scale (by a tensor)
    "int8_per_row": problem(
        "amax = x.abs().amax(dim=-1, keepdim=True)\nscale = amax / 127.0\n"
        "return torch.round(x / scale).clamp(-127.0, 127.0)", "[ties()]"),
    # one scale for the whole tensor
    "int8_per_tensor": problem(
        "scale = x.abs().amax() / 127.0\nreturn torch.clamp(torch.round(x / scale), -127, 127)",
        "[ties()]"),
    # a Python number as the divisor, and the step multiplied back
    "number_divisor": problem("return torch.round(x / 0.37) * 0.37",
                              "[(torch.randint(-100, 100, (64, 256)).float() + 0.5) * 0.37]"),
    # fp8-like: scale = 448 / amax is torch's reciprocal of amax times 448, then clamp + round
    "fp8_like": problem(
        "amax = x.abs().amax(dim=-1, keepdim=True)\nscale = 448.0 / amax\n"
        "return torch.round(torch.clamp(x * scale, -448.0, 448.0))", "[fp8_ties()]"),
    # ties to even: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> -0
    "round_half_even": problem("return torch.round(x * 1.0)",
                               "[torch.randint(-50, 50, (33, 65)).float() + 0.5]"),
}
HELPERS = ("\n\ndef ties():\n" + "".join("    " + line + "\n" for line in TIES.splitlines())
           + "    return x\n\n\ndef fp8_ties():\n"
           "    a = torch.rand(64, 1) * 4 + 0.5\n"
           "    x = (torch.randint(-440, 440, (64, 256)).float() + 0.5) * (a / 448.0)\n"
           "    x[:, :1] = a\n    return x\n")
PROBLEMS = {name: source + HELPERS for name, source in PROBLEMS.items()}


def draw(name: str, seed: int = 0) -> torch.Tensor:
    """The problem's input for one seed, as its own get_inputs draws it."""
    scope: dict = {}
    exec(PROBLEMS[name], scope)
    torch.manual_seed(seed)
    return scope["get_inputs"]()[0]


def float32_divide(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a / b correctly rounded in float32 (numpy's division), independent of torch's."""
    return torch.from_numpy(a.numpy() / b.numpy())


@pytest.mark.slow     # a table: each problem judged on both targets
@pytest.mark.parametrize("target", ["cpp", "triton"])
@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_the_first_quantisation_kernel_is_correct_to_the_step(name, target, tmp_path):
    ref, generation = generate(PROBLEMS[name], target)
    assert "round" not in generation.kept_ops, generation.kept_ops    # rounded in the kernel
    result = judge(ref, generation, target, tmp_path)
    assert result.state == CORRECT, result.message


def test_the_old_arithmetic_flips_steps_on_these_inputs():
    """What the agent wrote before, computed directly: each one is off by a step somewhere on
    these draws, where torch's own result and the new kernels agree."""
    x = draw("int8_per_row")
    scale = x.abs().amax(dim=-1, keepdim=True) / 127.0
    torch_steps = torch.round(x / scale)
    assert torch.equal(torch_steps, torch.round(float32_divide(x, scale.expand_as(x))))
    # C++: the per-row divisor inverted once, then a multiply per element
    assert (torch.round(x * (1.0 / scale)) != torch_steps).sum() > 100

    x = draw("int8_per_tensor")
    scale = x.abs().amax() / 127.0
    assert (torch.round(x * (1.0 / scale)) != torch.round(x / scale)).sum() > 0

    x = draw("fp8_like")
    amax = x.abs().amax(dim=-1, keepdim=True)
    torch_scale = 448.0 / amax                       # Tensor.__rtruediv__: reciprocal * 448
    assert torch.equal(torch_scale, torch.reciprocal(amax) * 448.0)
    divided = torch.from_numpy(np.float32(448.0) / amax.numpy())      # the old `448.0f / amax`
    steps = lambda s: torch.round(torch.clamp(x * s, -448.0, 448.0))
    assert (steps(divided) != steps(torch_scale)).sum() > 100

    # a GPU's torch multiplies by the number's float32 reciprocal (ATen's div_true_kernel_cuda)
    # where the CPU divides: the kernel must know which, the two flip steps on these inputs
    x = draw("number_divisor")
    reciprocal = float(np.float32(1.0) / np.float32(0.37))
    assert torch.equal(torch.round(x / 0.37), torch.round(float32_divide(x, torch.full_like(x, 0.37))))
    assert (torch.round(x * reciprocal) != torch.round(x / 0.37)).sum() > 100

    # round half to even, not half away from zero
    x = draw("round_half_even")
    assert (torch.floor(x + 0.5) != torch.round(x)).sum() > 100


def test_a_division_before_a_rounding_is_exact_in_each_language():
    _, cpp = generate(PROBLEMS["int8_per_row"], "cpp")
    assert "_inv" not in cpp.code and "std::nearbyint" in cpp.code
    _, triton = generate(PROBLEMS["int8_per_row"], "triton")
    assert "tl.math.div_rn(" in triton.code and "enable_fp_fusion=False" in triton.code
    # amax / 127.0: a multiply by float32(1 / 127) on a GPU, a true division on the CPU
    assert "0.007874015718698502" in triton.code
    assert "NUMBER_DIVISION_BY_RECIPROCAL = tl.constexpr(torch.cuda.is_available())" in \
        triton.code


def test_a_division_with_no_rounding_after_it_keeps_the_reciprocal():
    """RMS-norm-like x / rms: a last-bit difference stays inside the tolerance, so the C++
    kernel still divides once per row and multiplies per element."""
    source = problem("rms = torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + 1e-5)\n"
                     "return x / rms", "[torch.randn(8, 64)]")
    _, cpp = generate(source, "cpp")
    assert "_inv = 1.0f /" in cpp.code
    _, triton = generate(source, "triton")
    assert "div_rn" not in triton.code

