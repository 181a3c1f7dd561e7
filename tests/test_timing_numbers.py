"""The parent's timing loop on scripted numbers: the blocks each side "measured" come from a
script, so what is checked (rounds added until the interval is narrow, torch.compile paired in
the same rounds, the cached figure kept out of every ratio, the noisy sentence, the profile's
note) never depends on this machine's speed or load."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kforge_nb.evaluator import profile_note, EvalOptions
from kforge_nb.evaluator.parent import stats
from kforge_nb.evaluator.parent import replies
from kforge_nb.evaluator.parent.timing import TimedRounds, to_check
from kforge_nb.result import CORRECT, Result, Timing
from kforge_nb.targets import get_target


class Scripted(TimedRounds):
    """An Evaluation's timer whose blocks are a script: {side: [ms of round 0, round 1, ...]};
    no worker is started (ask_side reads the script)."""

    def __init__(self, script: dict[str, list[float]], tmp: Path, **options):
        rival = type("R", (), {"last_wall_ms": 0.0, "close": lambda self: None})() \
            if "rival" in script else None
        talk = type("Talk", (), {"last_wall_ms": 0.0})()   # the parent's clock, scripted too
        super().__init__(talk, type("P", (), {"source": "scripted problem"})(),
                         get_target("cpp"), EvalOptions(out_dir=tmp, **options), tmp,
                         summary={}, secret=1, exchange=tmp, exchange_path=str,
                         refused=lambda reply: None, lap=lambda phase: None, rival=rival)
        self.script, self.asked = script, []
        self.rounds_seen = {side: 0 for side in script}

    def ask_side(self, side, calls, chooser=None, fastest=False):
        k = self.rounds_seen[side]
        self.rounds_seen[side] += 1
        self.asked.append(side)
        ms = self.script[side][k % len(self.script[side])]
        samples = list(ms) if isinstance(ms, (list, tuple)) else [ms] * calls   # a block's calls
        self.talk.last_wall_ms = sum(samples)
        if side == "rival":
            self.rival.last_wall_ms = sum(samples)
        return {"samples": samples, "wall_ms": None, "kept": []}

    def cpu_watch(self):
        return None

    def outside_watch(self):
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
    # the rank interval [1.5, 1.5], widened on the CPU by what a kernel shows against itself
    noise = stats.SELF_NOISE_FLOOR_CPU
    assert t.speedup_vs_compile_ci == pytest.approx([1.5 / (1 + noise), 1.5 * (1 + noise)])
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
    cap = TimedRounds.timing_cap_s
    assert cap(evaluation) == cap(evaluation, Seen()) == 4.0
    assert cap(evaluation, Seen(others_cores=1.8, load1=4.0)) == 16.0
    long = Scripted({"judge": [1.0], "candidate": [1.0]}, tmp_path, timing_budget_s=20.0)
    assert cap(long, Seen(others_cores=1.8)) == 120.0


def test_on_a_contested_cpu_the_interval_spans_the_medians_and_the_low_calls(tmp_path):
    """Noise that only adds time: eager's medians swing tenfold while its low calls stay put.
    Busy, the point is the low calls' ratio and the interval holds both rank intervals (as
    wide as the data, no floor of its own); idle, the medians' figures as before."""
    script = {"judge": [[2.0, 2.0, 20.0], [2.0, 20.0, 20.0]],      # low calls 2; medians 2, 20
              "candidate": [[1.0, 1.0, 1.0]]}
    for seen, busy in ((Seen(), False), (Seen(others_cores=1.8, load1=4.0), True)):
        run = Scripted(script, tmp_path)
        paired = run.interleave(6, {side: 3 for side in script}, adaptive=False)
        paired["cpu"] = seen.reading()
        result = Result(CORRECT, "ok")
        run.fill_timing(result, paired, stats.median(paired["ratios"]["judge"]), False, "")
        t = result.timing
        assert t.busy is busy
        low, high = t.speedup_vs_eager_ci
        noise = 1 + stats.SELF_NOISE_FLOOR_CPU
        assert (low, high) == (pytest.approx(2.0 / noise), pytest.approx(20.0 * noise))
        if busy:
            assert t.speedup_vs_eager == pytest.approx(2.0)        # the low calls' ratio
            assert "as wide as the load made it" in t.busy_note
            assert "eager's own low calls ranged" in t.busy_note
        else:
            assert t.speedup_vs_eager == pytest.approx(11.0)       # the medians' ratio
        assert t.candidate_low_ms == pytest.approx(1.0)


def test_the_rival_is_a_side_of_every_round_and_decides_head_to_head(tmp_path):
    """The best so far timed in the same rounds: its low calls against the candidate's decide,
    whatever eager does meanwhile."""
    script = {"judge": [2.0, 40.0, 3.0, 25.0], "candidate": [[1.0, 1.0, 9.0]],
              "rival": [[1.5, 1.5, 1.6]]}
    run = Scripted(script, tmp_path, rival="# the best", rival_id="0.0")
    paired = run.interleave(6, {side: 3 for side in script}, adaptive=False)
    rounds = [run.asked[i:i + 3] for i in range(0, len(run.asked), 3)]
    assert rounds[0] == ["judge", "candidate", "rival"]
    assert rounds[1] == ["rival", "candidate", "judge"]
    result = Result(CORRECT, "ok")
    run.fill_timing(result, paired, stats.median(paired["ratios"]["judge"]), False, "")
    versus = result.timing.versus
    assert versus["id"] == "0.0" and versus["verdict"] == "faster"
    assert versus["ratio"] == pytest.approx(1.5) and versus["rounds"] == 6
    assert versus["rival_ms"] == pytest.approx(1.5)
    assert versus["candidate_ms"] == pytest.approx(1.0)


def test_a_rival_that_fails_voids_the_head_to_head_and_not_the_verdict(tmp_path):
    from kforge_nb.evaluator.parent.rival import RivalFailed

    class Failing(Scripted):
        def ask_side(self, side, calls, chooser=None, fastest=False):
            if side == "rival" and self.rounds_seen["rival"] == 2:
                raise RivalFailed("its worker stopped: killed by SIGSEGV")
            return super().ask_side(side, calls, chooser, fastest)

    script = {"judge": [2.0], "candidate": [1.0], "rival": [1.5]}
    run = Failing(script, tmp_path, rival="# the best", rival_id="0.0")
    paired = run.interleave(6, {side: 3 for side in script}, adaptive=False)
    assert not paired["rival"] and len(paired["ratios"]["judge"]) == 6
    result = Result(CORRECT, "ok")
    run.fill_timing(result, paired, 2.0, False, "")
    assert result.state == CORRECT and result.timing.speedup_vs_eager == pytest.approx(2.0)
    assert result.timing.versus == {"id": "0.0", "verdict": "void",
                                    "why": "its worker stopped: killed by SIGSEGV"}


def test_rounds_go_on_until_the_head_to_head_is_decided(tmp_path):
    """Eager's interval is narrow from the start; the duel's is not (the rival a little
    faster, then a little slower, round after round), so rounds are added for it."""
    script = {"judge": [2.0], "candidate": [1.0], "rival": [0.9, 1.1]}
    run = Scripted(script, tmp_path, rival="# the best", rival_id="0.0")
    paired = run.interleave(6, {side: 3 for side in script})
    assert len(paired["ratios"]["judge"]) == stats.MAX_ROUNDS and paired["stop"] == "cap"
    settled = Scripted({"judge": [2.0], "candidate": [1.0], "rival": [1.5]}, tmp_path,
                       rival="# the best", rival_id="0.0")
    assert len(settled.interleave(6, {side: 3 for side in script})["ratios"]["judge"]) == 6



def test_a_blocks_fastest_call_is_checked_beside_those_drawn_and_is_its_low_time():
    samples = [1.2, 0.9, 0.5, 1.1, 0.5]
    block = {"samples": samples, "kept": [13, 14], "fastest": 12}
    assert to_check(block) == [13, 14, 12]
    assert to_check({**block, "fastest": 13}) == [13, 14]
    assert to_check({**block, "fastest": None}) == [13, 14]
    assert stats.block_low(samples, stats.FASTEST) == 0.5


@pytest.mark.parametrize("fastest, ok", [(12, True), (14, False), (None, False), ("12", False)])
def test_the_worker_must_name_its_first_fastest_call(fastest, ok):
    """The parent checks the call the samples say is fastest, not one the worker picks."""
    reply = {"samples": [1.2, 0.9, 0.5, 1.1, 0.5], "wall_ms": None, "kept": [11, 13],
             "fastest": fastest}
    if ok:
        assert replies.timed(reply, (5, [1, 3], True))["fastest"] == 12
    else:
        with pytest.raises(replies.ProtocolError, match="fastest"):
            replies.timed(reply, (5, [1, 3], True))
