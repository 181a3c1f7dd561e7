"""The statistics of a timing, driven by scripted numbers (none depends on this machine): the
rank interval of a median of paired ratios, the rule that stops adding rounds, the busy
decision, and how a speedup with its interval reads."""
from __future__ import annotations

import math

import pytest

from kforge_nb.evaluator.parent import stats
from kforge_nb.intervals import speedup_text
from kforge_nb.result import CORRECT, Result, Timing


def test_the_rank_interval_is_exact_for_the_median_and_reaches_95_from_six_values():
    # below 6 values no pair of ranks covers 95 %: the whole range, with what it does cover
    assert stats.coverage(5) == pytest.approx(1 - 2 / 32)
    assert stats.coverage(6) == pytest.approx(1 - 2 / 64) and stats.coverage(6) >= 0.95
    for n in range(6, 80):
        k = stats.rank(n)
        assert 1 - 2 * stats.binomial_cdf(k - 1, n) >= 0.95          # it covers 95 % ...
        assert 1 - 2 * stats.binomial_cdf(k, n) < 0.95 or k == (n + 1) // 2   # ... tightly
    assert stats.rank(9) == 2 and stats.rank(20) == 6       # the tables' values


def test_the_interval_of_scripted_ratios():
    ratios = [1.40, 1.45, 1.38, 1.50, 1.42, 1.41, 1.44, 1.39, 1.43]
    low, high = stats.median_interval(ratios)
    assert (low, high) == (1.39, 1.45)                      # x(2), x(8) of 9
    assert low <= stats.median(ratios) <= high
    assert stats.median_interval([]) is None
    assert stats.median_interval([float("nan"), 2.0]) == (2.0, 2.0)
    assert stats.half_width((1.35, 1.50), 1.42) == pytest.approx(1.50 / 1.42 - 1)


def test_it_is_deterministic_and_order_free():
    ratios = [0.9, 1.3, 1.1, 1.0, 1.2, 0.8, 1.05, 0.95]
    assert stats.median_interval(ratios) == stats.median_interval(sorted(ratios)[::-1])


def test_rounds_go_on_until_the_interval_is_narrow():
    steady = [1.50, 1.52, 1.49, 1.51, 1.50, 1.48]
    assert stats.enough_rounds(steady[:5], 0.5, 4.0) == (False, "")      # the fewest: 6
    assert stats.enough_rounds(steady, 0.6, 4.0) == (True, "narrow")
    # a noisy sequence: rounds are added while the time allows, then the cap says stop
    noisy = [1.0, 2.0, 0.6, 1.7, 0.9, 1.4]
    assert stats.enough_rounds(noisy, 0.6, 4.0) == (False, "")
    assert stats.enough_rounds(noisy, 3.5, 4.0) == (True, "cap")      # next round passes it
    assert stats.enough_rounds(noisy * 10, 1.0, 100.0) == (True, "cap")   # MAX_ROUNDS


def test_a_scripted_sequence_stops_where_the_rule_says():
    """The loop as the evaluator runs it, on a script of ratios: noise that settles."""
    script = [1.8, 0.7, 1.4, 1.0, 1.3, 1.2] + [1.21, 1.19, 1.2, 1.22, 1.18, 1.2] * 5
    seen, stop = [], ""
    for k, ratio in enumerate(script):
        seen.append(ratio)
        done, stop = stats.enough_rounds(seen, elapsed_s=0.1 * (k + 1), cap_s=10.0)
        if done:
            break
    assert stop == "narrow" and 6 < len(seen) < len(script)
    assert stats.noise_sentence(seen) == ""
    assert "stayed noisy" in stats.noise_sentence(script[:6])


def test_a_busy_machine_is_said_and_an_idle_one_is_not():
    idle = stats.busy_decision(load1=1.1, cores=2, others_cores=0.05, worker_cpu_s=0.98,
                               wall_s=1.0, preempted=3)
    assert idle == (False, "")
    busy, note = stats.busy_decision(load1=3.9, cores=2, others_cores=1.9, worker_cpu_s=0.5,
                                     wall_s=1.0, preempted=240)
    assert busy and "1.9 of 2 cores" in note and "240 times a second" in note
    assert "load average was 3.9" in note and "50% of the wall time" in note
    # preemption alone (the load average lags a short burst) is enough
    assert stats.busy_decision(None, 2, None, None, 2.0, 400)[0]
    # nothing readable (no /proc): not said busy
    assert stats.busy_decision(None, 2, None, None, 1.0, None) == (False, "")


def test_the_summary_reads_speedups_with_their_intervals():
    assert speedup_text(1.42, [1.35, 1.50]) == "1.42x ±5%"     # half the width, of the point
    assert speedup_text(1.42, None) == "1.42x"
    t = Timing(real=True, candidate_ms=1.0, eager_ms=1.42, speedup_vs_eager=1.42,
               speedup_vs_eager_ci=[1.35, 1.50], compile_ms=1.2, speedup_vs_compile=1.2,
               speedup_vs_compile_ci=[1.1, 1.3], noisy=True, noise_note="it stayed wide",
               busy=False)
    text = Result(CORRECT, "ok", timing=t).summary()
    assert "eager 1.42 ms (1.42x ±5% side by side)" in text
    assert "torch.compile 1.2 ms (1.20x ±8% side by side)" in text
    assert "noisy: it stayed wide" in text
    # busy: the intervals written out (they span block medians and low calls: lopsided)
    t.busy, t.busy_note = True, "the machine was busy"
    text = Result(CORRECT, "ok", timing=t).summary()
    assert "1.42x (95 % interval 1.35-1.5x) vs eager side by side" in text
    assert "1.20x (95 % interval 1.1-1.3x) vs torch.compile side by side" in text
    assert "±" not in text and "busy: the machine was busy" in text
    cached = Timing(real=True, candidate_ms=1.0, eager_ms=1.0, speedup_vs_eager=1.0,
                    compile_cached_ms=0.8, compile_cached_age_s=7200)
    assert "torch.compile 0.8 ms cached 2 h ago (not a ratio)" in \
        Result(CORRECT, "ok", timing=cached).summary()
    assert not math.isnan(stats.median([1.0, 3.0]))
