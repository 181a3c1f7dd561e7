"""Where a timed call's inputs lie in memory moves a memory-bound call's time on a CPU by up to a
quarter between processes; the timing moves its live input sets to fresh memory before every
CPU block, so the rounds of one judging see several placements (harness.TimingSets.move).
These tests drive harness.time_calls itself: no timing is asserted, only what the calls saw."""
from __future__ import annotations

import torch

from kforge_nb.evaluator.worker import harness


def sets_of(values: int = 1 << 12) -> list[list]:
    gen = torch.Generator().manual_seed(7)
    return [[torch.randn(values, generator=gen), 3] for _ in range(3)]


def seen_by_calls(sets: harness.TimingSets, blocks: int, calls: int) -> list[tuple[int, float]]:
    """(data pointer, sum of values) of the first input of every call of `blocks` blocks."""
    seen = []

    def call(inputs):
        seen.append((inputs[0].data_ptr(), float(inputs[0].double().sum())))
        return inputs[0] * inputs[1]
    for _ in range(blocks):
        harness.time_calls(call, sets, calls, "cpu")
    return seen


def test_each_cpu_block_times_its_inputs_in_fresh_memory():
    seen = seen_by_calls(harness.TimingSets(sets_of(), key=11), blocks=3, calls=4)
    by_block = [{ptr for ptr, _ in seen[i:i + 4]} for i in (0, 4, 8)]
    assert all(len(block) == 3 for block in by_block)        # the three sets, rotated
    assert by_block[0].isdisjoint(by_block[1])                # moved between blocks ...
    assert by_block[1].isdisjoint(by_block[2])


def test_moving_changes_no_value_a_call_sees():
    moved = seen_by_calls(harness.TimingSets(sets_of(), key=11), blocks=3, calls=4)
    kept = harness.TimingSets(sets_of(), key=11)                # the same sets, never moved
    in_place = [float(kept.inputs(k)[0].double().sum()) for k in range(12)]
    assert [value for _, value in moved] == in_place


def test_sets_over_the_limit_stay_where_they_are(monkeypatch):
    monkeypatch.setattr(harness, "MOVE_BYTES", 1024)            # smaller than one set
    seen = seen_by_calls(harness.TimingSets(sets_of(), key=11), blocks=2, calls=4)
    assert {ptr for ptr, _ in seen[:4]} == {ptr for ptr, _ in seen[4:]}


def test_blocks_too_short_to_come_back_to_a_set_stay_where_they_are():
    """The Triton interpreter times blocks of two calls: kept in place, the next block comes
    back to the first set's address, where a memo keyed on it serves a stale answer."""
    seen = seen_by_calls(harness.TimingSets(sets_of(), key=11), blocks=2, calls=2)
    assert seen[3][0] == seen[0][0]                             # call 3 is set 0 again
