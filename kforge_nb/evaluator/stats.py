"""The statistics of a timing: an interval for a median of paired ratios, when enough rounds
have run, and whether the machine was busy while they ran. Pure functions of numbers: the
evaluator feeds them what it measured, the tests feed them scripted numbers.

Why the distribution-free rank interval (and not a bootstrap) for the median of the rounds'
ratios: each interleaved round gives one ratio (eager / candidate, compile / candidate), and a
round is the unit that is independent of the others (a burst of load hits both sides of one
round). For the median of n independent draws of any continuous distribution, the order
statistics x(k) <= median <= x(n-k+1) hold it with probability 1 - 2 P(Binomial(n, 1/2) < k),
exactly, whatever the distribution: a 95 % interval needs only the ranks. A percentile
bootstrap over the same 6-20 ratios is narrower than that and covers less than it says at such
sizes (it cannot reach beyond the sample's own extremes and resamples ties), needs an RNG to be
repeatable, and costs thousands of resamples. The rank interval is exact, deterministic and
cheap; its one limit is that below 6 rounds no pair of ranks reaches 95 % (n = 5 gives 93.75 %
at best), so the timing runs at least MIN_ROUNDS = 6 rounds and says the coverage it reached
(`coverage()`) when fewer are all there is.
"""
from __future__ import annotations

import math

LEVEL = 0.95
GOAL = 0.05            # the interval is narrow enough when within ±5 % of its median
MIN_ROUNDS = 6         # the fewest rounds whose rank interval reaches 95 %
MAX_ROUNDS = 60        # an absolute cap on the rounds, whatever the time cap allows


def median(values: list[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    if not n:
        raise ValueError("the median of no values")
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def binomial_cdf(k: int, n: int) -> float:
    """P(Binomial(n, 1/2) <= k)."""
    return sum(math.comb(n, i) for i in range(0, k + 1)) / 2 ** n if k >= 0 else 0.0


def rank(n: int, level: float = LEVEL) -> int:
    """The largest k (1-based) with [x(k), x(n-k+1)] covering the median at `level`; 1 (the
    whole range, whatever it covers) where no k does."""
    k = 1
    while k + 1 <= (n + 1) // 2 and 1 - 2 * binomial_cdf(k, n) >= level:
        k += 1
    return k


def coverage(n: int, level: float = LEVEL) -> float:
    """What the interval over n values covers: `level` or more, or less for n < MIN_ROUNDS."""
    if n <= 0:
        return 0.0
    return 1 - 2 * binomial_cdf(rank(n, level) - 1, n)


def median_interval(values: list[float], level: float = LEVEL) -> tuple[float, float] | None:
    """A `level` interval [low, high] for the median of the distribution `values` were drawn
    from (the rank interval: see the module docstring); None for no values."""
    finite = sorted(v for v in values if v is not None and math.isfinite(v))
    if not finite:
        return None
    k = rank(len(finite), level)
    return finite[k - 1], finite[len(finite) - k]


def half_width(interval: tuple[float, float] | None, center: float) -> float | None:
    """How far the interval reaches from `center`, as a fraction of it (the wider side): the
    `±6 %` a person reads."""
    if interval is None or not center or not math.isfinite(center):
        return None
    low, high = interval
    return max(high / center - 1, 1 - low / center, 0.0)


def enough_rounds(ratios: list[float], elapsed_s: float, cap_s: float,
                  min_rounds: int = MIN_ROUNDS, max_rounds: int = MAX_ROUNDS,
                  goal: float = GOAL) -> tuple[bool, str]:
    """Whether the interleaved timing may stop after these rounds: (stop, why).

    `ratios`: one per round so far (eager / candidate); `elapsed_s`: the parent's clock since
    the first round; `cap_s`: the time the rounds may take. Stops once the interval of the
    median is within ±`goal` ("narrow"), or when another round (as long as the mean one so
    far) would pass the cap or the rounds reach `max_rounds` ("cap"); never before
    `min_rounds` ("" while going on)."""
    n = len(ratios)
    if n < min_rounds:
        return False, ""
    center = median(ratios)
    width = half_width(median_interval(ratios), center)
    if width is not None and width <= goal:
        return True, "narrow"
    per_round = elapsed_s / n
    if n >= max_rounds or elapsed_s + per_round > cap_s:
        return True, "cap"
    return False, ""


def noise_sentence(ratios: list[float], goal: float = GOAL) -> str:
    """A sentence saying the interval stayed wide, or "" when it is narrow."""
    if not ratios:
        return ""
    center = median(ratios)
    width = half_width(median_interval(ratios), center)
    if width is None or width <= goal:
        return ""
    return (f"the timing stayed noisy: after {len(ratios)} rounds the 95 % interval of the "
            f"speedup over eager is ±{width:.0%} (the goal is ±{goal:.0%}); rankings closer "
            "than that are ties")


# --- a busy machine -----------------------------------------------------------------------------

# Judged again on a contested CPU, a kernel's speedup moves by far more than one judging's
# rank interval says (the scheduler's slices shift whole rounds): beside two busy loops on two
# cores, 30 judgings of one kernel spread 1.46x (p90/p10) with intervals of ±10 %, and held
# the idle median in 50 %; widened to at least ±25 % they held it in 93 %, and the kernel judged
# twice was never called different (benchmarks/noise.py; docs/noise-2026-11-26.md)
BUSY_FLOOR = 0.25


def at_least(interval: list[float] | None, point: float | None,
             floor: float = BUSY_FLOOR) -> list[float] | None:
    """`interval`, widened where needed to at least ±`floor` of `point`."""
    if interval is None or not point:
        return interval
    return [min(interval[0], point * (1 - floor)), max(interval[1], point * (1 + floor))]


OTHERS_BUSY = 0.5        # other processes used this many cores on average while we timed
PREEMPTED_PER_S = 100.0  # involuntary context switches of the candidate's worker a second
LOAD_OVER = 1.0          # the load average this far above the usable cores


def busy_decision(load1: float | None, cores: int, others_cores: float | None,
                  worker_cpu_s: float | None, wall_s: float, preempted: int | None
                  ) -> tuple[bool, str]:
    """Was the CPU contested while timing? (busy, a sentence saying what was seen).

    `load1`: the 1-minute load average at the end (it includes our own timed threads, hence
    the margin); `cores`: the cores this process may use; `others_cores`: CPU time other
    processes took during the timing, over its wall time (in cores); `worker_cpu_s`: CPU time
    of the candidate's worker over the timing; `wall_s`: the timing's wall time; `preempted`:
    the worker's involuntary context switches over it (a runnable thread taken off its core
    for another one: competition, never the kernel's own doing)."""
    seen, signs = [], 0
    if others_cores is not None and others_cores >= OTHERS_BUSY:
        signs += 1
        seen.append(f"other processes used {others_cores:.1f} of {cores} cores")
    rate = preempted / wall_s if preempted is not None and wall_s > 0 else None
    if rate is not None and rate >= PREEMPTED_PER_S:
        signs += 1
        seen.append(f"the candidate's worker was preempted {rate:.0f} times a second")
    if load1 is not None and load1 >= cores + LOAD_OVER:
        signs += 1
        seen.append(f"the load average was {load1:.1f} on {cores} cores")
    if not signs:
        return False, ""
    if worker_cpu_s is not None and wall_s > 0:
        seen.append(f"its worker had the CPU {worker_cpu_s / wall_s:.0%} of the wall time")
    return True, ("the machine was busy while timing (" + "; ".join(seen) + "): the figures "
                  f"carry that load, and their intervals are at least ±{BUSY_FLOOR:.0%} (a "
                  "judging on a contested CPU repeats only to about that)")
