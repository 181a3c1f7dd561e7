"""Scaled dot-product attention written by the builtin agent (templates/attention.py), judged
`correct` by the real evaluator: C++ with g++, Triton under the interpreter.

One problem holds every case as one output each, so one judging per target covers them: causal
and not, Lq < Lk and Lq > Lk (causal rows past the last key see every key), head dims that are
not powers of 2 (24: one padded block; 40: wider than the interpreter's 32-wide slices, so the
score product walks E in two slices and the output is split over two programs), lengths that
are not multiples of a block (37, 100), an explicit scale, 3-d and 4-d inputs.
"""
from __future__ import annotations

import pytest

from kforge_nb.result import CORRECT
from tests.test_builtin import generate, judge, problem

ATTENTION = problem(
    "a = F.scaled_dot_product_attention(q, k, v, is_causal=True)\n"
    "b = F.scaled_dot_product_attention(k, q, w)\n"
    "c = F.scaled_dot_product_attention(x, y, z, scale=0.3)\n"
    "d = F.scaled_dot_product_attention(y, x, x, is_causal=True, scale=0.2)\n"
    "return a, b, c, d",
    "[torch.randn(2, 3, 37, 24), torch.randn(2, 3, 100, 24), torch.randn(2, 3, 100, 40), "
    "torch.randn(2, 3, 37, 40), torch.randn(3, 37, 40), torch.randn(3, 100, 40), "
    "torch.randn(3, 100, 24)]",
    signature="q, k, v, w, x, y, z")


@pytest.mark.slow
@pytest.mark.parametrize("target", ["cpp", "triton"])
def test_attention_is_one_online_softmax_kernel_and_correct(target, tmp_path):
    ref, generation = generate(ATTENTION, target)
    assert generation.code is not None, generation.failure
    # every call is the agent's own kernel: nothing is left to torch
    assert "scaled_dot_product_attention" not in generation.kept_ops
    assert generation.code.count("= fused_scaled_dot_product_attention") == 4
    result = judge(ref, generation, target, tmp_path)
    assert result.state == CORRECT, result.message


@pytest.mark.slow     # Triton's interpreter over bf16 attention
def test_attention_under_bf16_keeps_its_scores_exact_and_is_correct(tmp_path):
    """Under the bf16 policy only p @ v takes bf16 tiles: scores rounded to bf16 before exp
    put 0.5 % of the outputs outside even bf16's tolerance (scaled inputs, error 0.37)."""
    ref, generation = generate(ATTENTION, "triton", precision="bf16")
    assert "p.to(tl.bfloat16), v.to(tl.bfloat16)" in generation.code
    assert "q.to(tl.bfloat16)" not in generation.code
    result = judge(ref, generation, "triton", tmp_path, precision="bf16")
    assert result.state == CORRECT, result.message


# Hugging Face's eager attention in bf16 (Llama's grouped-query heads): the products are `@`
# on bf16 tensors, kept in torch as vendor GEMMs; the mask and the fp32 softmax are the kernel
EAGER_BF16 = problem(
    "k = k.repeat_interleave(2, dim=1)\n"
    "scores = (q @ k.transpose(-1, -2)).float() / 4.0\n"
    "mask = torch.full((q.shape[-2], q.shape[-2]), float('-inf'), device=q.device).triu(1)\n"
    "return torch.softmax(scores + mask, dim=-1).to(q.dtype) @ v",
    "[torch.randn(1, 4, 24, 16, dtype=torch.bfloat16), "
    "torch.randn(1, 2, 24, 16, dtype=torch.bfloat16), "
    "torch.randn(1, 4, 24, 16, dtype=torch.bfloat16)]", signature="q, k, v")


@pytest.mark.slow
def test_eager_attention_keeps_its_at_products_declared_and_is_correct(tmp_path):
    """The kept `@` is declared as `matmul` (it was kept and then refused by the guardrail:
    realworld gqa_attention_causal and sliding_window_attention)."""
    ref, generation = generate(EAGER_BF16, "cpp")
    assert "matmul" in generation.kept_ops, generation.kept_ops
    result = judge(ref, generation, "cpp", tmp_path)
    assert result.state == CORRECT, result.message
