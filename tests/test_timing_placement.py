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


# --- integer inputs drawn anew per timed call, where the judge finds the draw cheap -------------

def module_of(values: int, slow_s: float = 0.0):
    """A problem module whose get_inputs() draws `values` floats and 16 ids, taking at least
    `slow_s` of CPU time (a draw as slow as a large RoPE module's on a GPU's host)."""
    import time
    import types

    def get_inputs():
        end = time.process_time() + slow_s
        while time.process_time() < end:
            pass
        return [torch.randn(values), torch.randint(0, 8, (16,))]
    return types.SimpleNamespace(get_inputs=get_inputs)


PLAN = [{"seed": s, "distribution": "given", "key": 5} for s in (1, 2)]


def test_a_slow_draw_of_a_large_set_leaves_its_integers_as_drawn_and_the_candidate_follows():
    large = harness.timing_sets(module_of(1 << 19, slow_s=0.05), PLAN, "cpu")    # 2 MiB a set
    assert large.redraw is not None
    cheap, ms = harness.redraw_is_cheap(large, "cpu")
    assert not cheap and ms >= 50
    followed = harness.timing_sets(module_of(1 << 19), [{**s, "redraw": cheap} for s in PLAN],
                                   "cpu")
    assert followed.redraw is None
    ids = [followed.inputs(k)[1].clone() for k in range(4)]
    assert torch.equal(ids[0], ids[2]) and torch.equal(ids[1], ids[3])   # the sets', rotated


def test_a_small_set_is_drawn_anew_per_call_however_slow_its_draw():
    small = harness.timing_sets(module_of(1 << 10, slow_s=0.05), PLAN, "cpu")
    assert harness.redraw_is_cheap(small, "cpu")[0]
    followed = harness.timing_sets(module_of(1 << 10), [{**s, "redraw": True} for s in PLAN],
                                   "cpu")
    ids = [followed.inputs(k)[1].clone() for k in range(4)]
    assert not torch.equal(ids[0], ids[2])                   # call 2's own draw, not set 0's


def test_a_draw_that_waits_costs_no_cpu_and_is_cheap():
    """What the judge weighs is its own CPU time: a wall clock stretched by others' load (here
    a sleep, 50 ms a draw) is not counted."""
    import time
    import types

    def get_inputs():
        time.sleep(0.05)
        return [torch.randn(1 << 19), torch.randint(0, 8, (16,))]
    waiting = harness.timing_sets(types.SimpleNamespace(get_inputs=get_inputs), PLAN, "cpu")
    assert harness.redraw_is_cheap(waiting, "cpu")[1] < 50


def test_a_set_of_floats_only_has_no_redraw_to_decide():
    floats = harness.timing_sets(types_module(), PLAN, "cpu")
    assert harness.redraw_is_cheap(floats, "cpu") == (False, None)


def types_module():
    import types
    return types.SimpleNamespace(get_inputs=lambda: [torch.randn(64)])
