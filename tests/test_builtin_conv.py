"""The builtin agent's own convolution kernels (templates/conv*.py) judged `correct` by the real
evaluator, in C++ (g++) and Triton (the CPU interpreter).

Each problem holds several convolutions of one kind, returned together, so that one judging
covers many variants: 1-d / 2-d / 3-d, stride, padding, dilation, groups, depthwise (with a
channel multiplier), pointwise, 'same' padding, asymmetric kernels and odd sizes, with and
without bias; transposed ones with output_padding too.
"""
from __future__ import annotations

import re

import pytest

from kforge_nb.result import CORRECT
from tests.test_builtin import generate, judge, problem

PLAIN = problem(
    "return (self.c1(a), self.c2(b), self.pw(b), self.dw(b), self.c3(c),\n"
    "        F.conv2d(b, self.w, padding='same', dilation=2))",
    "[torch.randn(2, 4, 33), torch.randn(1, 8, 9, 11), torch.randn(1, 4, 7, 5, 9)]",
    "self.c1 = nn.Conv1d(4, 6, 5, stride=3, padding=2, dilation=2, groups=2)\n"
    "self.c2 = nn.Conv2d(8, 12, (3, 5), stride=(2, 1), padding=(1, 2), dilation=(2, 1), "
    "groups=4, bias=False)\n"
    "self.pw = nn.Conv2d(8, 5, 1)\n"
    "self.dw = nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=8)\n"
    "self.c3 = nn.Conv3d(4, 6, (3, 2, 3), stride=(2, 1, 3), padding=(1, 0, 1), "
    "dilation=(1, 2, 1), groups=2)\n"
    "self.w = nn.Parameter(torch.randn(7, 8, 3, 3) * 0.1)",
    signature="a, b, c")

TRANSPOSED = problem(
    "return self.t1(a), self.t2(b), self.dw(b), self.t3(c)",
    "[torch.randn(2, 4, 13), torch.randn(1, 8, 5, 6), torch.randn(1, 4, 3, 4, 5)]",
    "self.t1 = nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1, dilation=2, "
    "groups=2)\n"
    "self.t2 = nn.ConvTranspose2d(8, 12, (3, 5), stride=(2, 3), padding=(1, 2), "
    "output_padding=(1, 2), dilation=(2, 1), groups=4, bias=False)\n"
    "self.dw = nn.ConvTranspose2d(8, 8, 3, stride=2, padding=1, groups=8)\n"
    "self.t3 = nn.ConvTranspose3d(4, 6, 3, stride=(2, 1, 2), padding=1, "
    "output_padding=(1, 0, 1), groups=2)",
    signature="a, b, c")


@pytest.mark.slow
@pytest.mark.parametrize("target", ["cpp", "triton"])
@pytest.mark.parametrize("source", [PLAIN, TRANSPOSED], ids=["plain", "transposed"])
def test_every_conv_variant_gets_a_correct_kernel_of_its_own(source, target, tmp_path):
    ref, generation = generate(source, target)
    assert generation.kept_ops == [], generation.kept_ops      # no conv left to torch
    result = judge(ref, generation, target, tmp_path)
    assert result.state == CORRECT, result.message


def test_triton_conv_kernels_by_kind_and_precision():
    code = generate(PLAIN, "triton")[1].code
    kernels = re.findall(r"@triton\.jit\ndef (\w+)\((.*)\):", code)
    assert len(kernels) == 6
    # depthwise: a direct kernel (no product); the others an implicit GEMM in exact fp32
    direct = [name for name, params in kernels if "BLOCK: tl.constexpr" in params]
    assert len(direct) == 1
    assert code.count('tl.dot(a, b, acc, input_precision="ieee")') == 5
    assert "tl.program_id(0).to(tl.int64)" in code        # offsets past 2^31 elements
    bf16 = generate(PLAIN, "triton", precision="bf16")[1].code
    assert "tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16), acc)" in bf16
    assert "key=['M', 'COG', 'K']" in bf16
    # strided transposed convs walk only the taps that reach an input, by output phase; a
    # phase's tap count can be 0, so the K loop's divisors are kept >= 1 (a division by a
    # count that may be 0 is undefined behaviour that LLVM folded into wrong results on a GPU)
    transposed = generate(TRANSPOSED, "triton")[1].code
    assert transposed.count("phase = tl.program_id(0)") == 3
    assert "count_h = tl.maximum(tl.where(rh == 0, 0, 3), 1)" in transposed
