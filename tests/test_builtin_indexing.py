"""The builtin agent's gathers and scatters (issue 36, item 4): `x[ids]`, index_select and
embedding become one gather kernel; index_copy and index_put (their in-place forms arriving
functional from torch.export) one scatter kernel; integer `//` and `%` on the indices are folded
into the kernel with torch's floor semantics. Rows move as bits (bf16 stays 16-bit words).

Each problem is generated and judged `correct` by the real evaluator with nothing left in
torch. Where indices repeat in index_put (torch calls the result undefined, and its CPU kernel
keeps the last write only at small sizes) the agent's kernels keep the last row in index order,
on every thread. What the agent does not write it says: an accumulating index_put stays in
torch, a cache buffer the module writes in place is refused by name, and an index out of range
raises IndexError in the C++ candidate as in torch, its kernel never touching memory outside
the tensors.
"""
from __future__ import annotations

import types

import pytest
import torch

from kforge_nb.result import CORRECT
from tests.test_builtin import generate, judge, problem

pytestmark = pytest.mark.slow

PROBLEMS = {
    # ids drawn from [-64, 64): negative ones count from the end, as torch's do
    "gathers_by_ids": problem(
        "return table[ids], torch.index_select(x, 1, cols), F.embedding(ids % 64, table), "
        "x[:, pairs], self.embed(cols)",
        "[torch.randn(64, 48).bfloat16(), torch.randint(-64, 64, (5, 7)), "
        "torch.randn(6, 40, 3), torch.randint(0, 40, (9,)), torch.randint(-40, 40, (4, 2))]",
        "self.embed = nn.Embedding(40, 24)", signature="table, ids, x, cols, pairs"),
    # written into the input itself: export's functional graph returns the written copy
    "index_copy_into_the_cache_in_place": problem(
        "cache.index_copy_(0, slots, k)\nreturn cache",
        "[torch.randn(96, 2, 16).bfloat16(), torch.randperm(96)[:24], "
        "torch.randn(24, 2, 16).bfloat16()]", signature="cache, slots, k"),
    # vLLM's paged write with slots from [-128, 128): -1 // 16 is block -1 (the last), offset
    # 15, as torch floors; no two slots name one row (at the judge's other batch size too)
    "paged_write_at_computed_positions": problem(
        "c = cache.clone()\nc[slots // 16, slots % 16] = key\nreturn c",
        "[torch.randn(32, 16, 2, 8).bfloat16(), torch.randperm(256)[:40] - 128, "
        "torch.randn(40, 2, 8).bfloat16()]", signature="cache, slots, key"),
    # 64 writes into 8 rows: every row written several times. torch calls the result undefined;
    # at this size its CPU kernel keeps the last write (measured: 20 of 20 draws; at 512 writes
    # it did not in 16 of 20), the row the agent's kernels keep
    "index_put_with_repeated_positions": problem(
        "c = x.clone()\nc.index_put_((ids,), v)\nreturn c",
        "[torch.randn(8, 33), torch.randint(0, 8, (64,)), torch.randn(64, 33)]",
        signature="x, ids, v"),
}
TRITON = ["paged_write_at_computed_positions", "index_put_with_repeated_positions"]


@pytest.mark.parametrize("target,name", [("cpp", n) for n in sorted(PROBLEMS)] +
                         [("triton", n) for n in TRITON])
def test_the_first_candidate_is_correct_with_nothing_left_in_torch(name, target, tmp_path):
    ref, generation = generate(PROBLEMS[name], target)
    assert generation.code is not None, generation.failure
    assert generation.kept_ops == [], generation.notes
    result = judge(ref, generation, target, tmp_path)
    assert result.state == CORRECT, result.message


def test_the_index_arithmetic_runs_in_the_scatter_kernel():
    """The paged write is one kernel: `//` and `%` are positions computed where the slots are
    read, never a torch call or a float32 division."""
    _, generation = generate(PROBLEMS["paged_write_at_computed_positions"], "cpp")
    assert generation.code.count('extern "C" int64_t') == 1
    assert "% 16 + 16) % 16)" in generation.code
    assert "torch.floor_divide" not in generation.code and "torch.remainder" not in generation.code


def candidate_module(code: str) -> types.ModuleType:
    module = types.ModuleType("candidate")
    exec(compile(code, "candidate.py", "exec"), module.__dict__)
    return module


def test_repeated_indices_keep_the_last_row_in_index_order_on_every_thread():
    """1 MiB of rows, so the C++ kernel's threads split the destination rows: each row holds
    the last value written to it, in index order (torch's own CPU result at this size is not
    that, nor reproducible: the behaviour is the agent's, stated, not torch's)."""
    source = PROBLEMS["index_put_with_repeated_positions"]
    _, generation = generate(source, "cpp")
    model = candidate_module(generation.code).ModelNew()
    x, ids, v = torch.randn(64, 64), torch.randint(0, 64, (4096,)), torch.randn(4096, 64)
    last = x.clone()
    for r in range(len(ids)):
        last[ids[r]] = v[r]
    assert torch.equal(model(x, ids, v), last)


def test_an_index_out_of_range_raises_like_torch_and_writes_nothing_outside():
    ref, generation = generate(PROBLEMS["paged_write_at_computed_positions"], "cpp")
    model = candidate_module(generation.code).ModelNew()
    cache, key = torch.randn(32, 16, 2, 8).bfloat16(), torch.randn(2, 2, 8).bfloat16()
    for slots in (torch.tensor([3, 512]), torch.tensor([3, -513])):
        with pytest.raises(IndexError) as torch_says:
            cache.clone()[slots // 16, slots % 16] = key
        with pytest.raises(IndexError, match="out of range"):
            model(cache, slots, key)
        assert "out of bounds" in str(torch_says.value)


def test_an_accumulating_index_put_stays_in_torch_and_says_so():
    source = problem("c = x.clone()\nc.index_put_((ids,), v, accumulate=True)\nreturn c * 2.0",
                     "[torch.randn(8, 33), torch.randint(0, 8, (64,)), torch.randn(64, 33)]",
                     signature="x, ids, v")
    _, generation = generate(source, "cpp")
    assert generation.kept_ops == ["index_put"], generation.notes
    assert "torch.index_put(" in generation.code and "kept in torch: index_put" in generation.code


def test_a_cache_buffer_the_module_writes_in_place_is_refused_by_name():
    source = problem("self.cache.index_copy_(0, slots, k)\nreturn self.cache * 1.0",
                     "[torch.randperm(16)[:4], torch.randn(4, 8)]",
                     "self.register_buffer('cache', torch.zeros(16, 8))",
                     signature="slots, k")
    _, generation = generate(source, "cpp")
    assert generation.code is None
    assert "self.cache" in generation.failure and "between calls" in generation.failure
