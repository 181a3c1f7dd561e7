"""The parent's timing loop on scripted numbers: the blocks each side "measured" come from a
script, so what is checked (rounds added until the interval is narrow, torch.compile paired in
the same rounds, the cached figure kept out of every ratio, the noisy sentence, the profile's
note) never depends on this machine's speed or load."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kforge_nb.evaluator import Evaluation, EvalOptions, profile_note, stats
from kforge_nb.result import CORRECT, Result, Timing


class Scripted(Evaluation):
    """An Evaluation whose blocks are a script: {side: [ms of round 0, round 1, ...]}."""

    def __init__(self, script: dict[str, list[float]], tmp: Path, **options):
        self.script, self.asked = script, []
        self.options = EvalOptions(out_dir=tmp, **options)
        self.summary, self.device, self.policy = {}, "cpu", {}
        self.compile_errors, self.last_wall_ms = {}, 0.0
        self.problem = type("P", (), {"source": "scripted problem"})()
        self.rounds_seen = {side: 0 for side in script}

    def ask_side(self, side, calls, keep=(), hold=True):
        k = self.rounds_seen[side]
        self.rounds_seen[side] += 1
        self.asked.append(side)
        ms = self.script[side][k % len(self.script[side])]
        self.last_wall_ms = ms * calls
        return {"samples": [ms] * calls, "wall_ms": None,
                "kept": [100 * k + i for i in keep]}

    def cpu_watch(self):
        return None

    def timing_cap_s(self, watch=None):
        return 1e9            # the rule's round cap, not this machine's clock, ends a script


def test_rounds_are_added_until_the_speedup_is_narrow(tmp_path):
    eager = [2.0, 4.0, 1.0, 3.0, 1.5, 2.5] + [2.0, 2.02, 1.98, 2.0] * 10
    run = Scripted({"judge": eager, "candidate": [1.0]}, tmp_path)
    paired = run.interleave(6, {"judge": 3, "candidate": 3})
    assert paired["stop"] == "narrow"
    n = len(paired["ratios"]["judge"])
    assert 6 < n < len(eager)
    low, high = stats.median_interval(paired["ratios"]["judge"])
    assert high / 2.0 - 1 <= 0.05 and 1 - low / 2.0 <= 0.05


def test_a_noisy_script_runs_to_the_cap_and_says_so(tmp_path):
    run = Scripted({"judge": [1.0, 3.0, 0.5, 2.0, 4.0, 0.7, 1.6], "candidate": [1.0]}, tmp_path)
    paired = run.interleave(6, {"judge": 3, "candidate": 3})
    assert paired["stop"] == "cap" and len(paired["ratios"]["judge"]) == stats.MAX_ROUNDS
    result = Result(CORRECT, "ok")
    run.fill_timing(result, paired, stats.median(paired["ratios"]["judge"]), False, "")
    t = result.timing
    assert t.noisy and "stayed noisy" in t.noise_note and "rankings closer" in t.noise_note
    low, high = t.speedup_vs_eager_ci
    assert low <= t.speedup_vs_eager <= high


def test_the_order_of_a_round_is_reversed_in_the_next(tmp_path):
    run = Scripted({"compile": [1.0], "judge": [2.0], "candidate": [1.0]}, tmp_path)
    run.interleave(6, {"compile": 3, "judge": 3, "candidate": 3}, adaptive=False)
    rounds = [run.asked[i:i + 3] for i in range(0, len(run.asked), 3)]
    assert rounds[0] == ["compile", "judge", "candidate"]
    assert rounds[1] == ["candidate", "judge", "compile"] and len(rounds) == 6


def test_vs_compile_is_a_median_of_paired_ratios_and_a_cached_figure_is_never_in_it(
        tmp_path, kforge_cache):
    # compile is 1.5x the candidate's time in every round; eager twice
    script = {"compile": [1.5, 3.0, 0.75], "judge": [2.0, 4.0, 1.0],
              "candidate": [1.0, 2.0, 0.5]}
    run = Scripted(script, tmp_path, baselines=("eager", "compile"))
    paired = run.interleave(6, {side: 3 for side in script})
    result = Result(CORRECT, "ok")
    run.fill_timing(result, paired, stats.median(paired["ratios"]["judge"]), False, "")
    t = result.timing
    assert t.speedup_vs_compile == pytest.approx(1.5)
    assert t.speedup_vs_compile_ci == pytest.approx([1.5, 1.5])
    assert t.speedup_vs_eager == pytest.approx(2.0) and t.compile_cached_ms is None
    # a planted cache entry (any file in the cache) changes no ratio: the next judging
    # without a compile side shows the figure this one stored, labelled, and nothing else
    for entry in (kforge_cache / "baselines").glob("*.json"):
        data = json.loads(entry.read_text())
        if data.get("compile_ms") == t.compile_ms:
            entry.write_text(json.dumps({**data, "eager_ms": 0.001, "compile_ms": 1000.0}))
    later = Scripted({"judge": [2.0], "candidate": [1.0]}, tmp_path)
    paired = later.interleave(6, {"judge": 3, "candidate": 3})
    result = Result(CORRECT, "ok")
    later.fill_timing(result, paired, 2.0, False, "")
    assert result.timing.speedup_vs_compile is None and result.timing.compile_ms is None
    assert result.timing.compile_cached_ms == 1000.0       # a display, its age beside it
    assert result.timing.compile_cached_age_s >= 0
    assert result.timing.speedup_vs_eager == pytest.approx(2.0)


def test_a_failed_compile_is_a_note_and_no_figure(tmp_path):
    run = Scripted({"judge": [2.0], "candidate": [1.0]}, tmp_path, baselines=("eager", "compile"))
    run.compile_errors = {"compile": "BackendCompilerFailed: no"}
    paired = run.interleave(6, {"judge": 3, "candidate": 3})
    result = Result(CORRECT, "ok")
    run.fill_timing(result, paired, 2.0, False, "")
    assert result.timing.speedup_vs_compile is None and result.timing.speedup_vs_compile_ci is None
    assert "torch.compile failed, so there is no figure beside it: BackendCompilerFailed" \
        in result.timing.note


def test_a_profile_far_from_the_timed_median_is_said():
    timing = Timing(real=True, candidate_ms=0.2854, eager_ms=0.8)
    far = {"events": [{"name": "cpu::tanh_kernel", "duration_us": 18330.0}],
           "calls_ms": [18.0, 18.3, 19.0, 17.0, 30.0]}
    near = {"events": [{"name": "aten::tanh", "duration_us": 790.0}]}
    note = profile_note(far, near, timing)
    assert "candidate's profiled call took 18.33 ms where its timed median is 0.2854 ms" in note
    assert "reference" not in note.split("(the median")[0]
    assert profile_note({"events": [{"name": "k", "duration_us": 300.0}]}, near, timing) == ""
    assert profile_note(far, near, Timing(real=False, candidate_ms=0.2)) == ""


class Seen:
    """A CPU watch whose reading is scripted."""

    def __init__(self, **reading):
        self.seen = {"wall_s": 2.0, "others_cores": 0.0, "worker_cpu_s": 2.0, "preempted": 0,
                     "load1": 0.5, "cores": 2, **reading}

    def reading(self):
        return dict(self.seen)


def test_the_rounds_may_go_on_longer_while_the_cpu_is_contested(tmp_path):
    """Beside busy loops a round's ratio swings with the scheduler: the cap grows 4x (never
    past the absolute cap), and only while the watch says busy."""
    evaluation = Scripted({"judge": [1.0], "candidate": [1.0]}, tmp_path, timing_budget_s=1.0)
    cap = Evaluation.timing_cap_s
    assert cap(evaluation) == cap(evaluation, Seen()) == 4.0
    assert cap(evaluation, Seen(others_cores=1.8, load1=4.0)) == 16.0
    long = Scripted({"judge": [1.0], "candidate": [1.0]}, tmp_path, timing_budget_s=20.0)
    assert cap(long, Seen(others_cores=1.8)) == 120.0


def test_a_judging_on_a_contested_cpu_has_an_interval_of_at_least_25_percent(tmp_path):
    """Narrow rounds under load are not repeatable: the busy verdict widens the intervals,
    and says so; an idle one keeps its own."""
    script = {"compile": [1.5], "judge": [2.0, 2.02, 1.98], "candidate": [1.0]}
    for seen, busy in ((Seen(), False), (Seen(others_cores=1.8, load1=4.0), True)):
        run = Scripted(script, tmp_path, baselines=("eager", "compile"))
        paired = run.interleave(6, {side: 3 for side in script}, adaptive=False)
        paired["cpu"] = seen.reading()
        result = Result(CORRECT, "ok")
        run.fill_timing(result, paired, stats.median(paired["ratios"]["judge"]), False, "")
        t = result.timing
        assert t.busy is busy
        low, high = t.speedup_vs_eager_ci
        clow, chigh = t.speedup_vs_compile_ci
        if busy:
            assert low <= 0.75 * t.speedup_vs_eager and high >= 1.25 * t.speedup_vs_eager
            assert clow <= 0.75 * t.speedup_vs_compile and chigh >= 1.25 * t.speedup_vs_compile
            assert "at least ±25%" in t.busy_note
        else:
            assert high / low < 1.1


def test_at_least_widens_only_what_is_narrower():
    assert stats.at_least([0.9, 1.1], 1.0, 0.25) == [0.75, 1.25]
    assert stats.at_least([0.5, 1.6], 1.0, 0.25) == [0.5, 1.6]
    assert stats.at_least(None, 1.0) is None and stats.at_least([1, 2], None) == [1, 2]
