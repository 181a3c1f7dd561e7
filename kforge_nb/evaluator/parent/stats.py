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

# --- two kernels side by side, and noise that only adds time -------------------------------------

# On a contested CPU a call is slowed, never sped up, by whoever else has the cores: a block's low
# calls are those the scheduler left alone, and they stay put while its median swings (beside two
# busy loops eager's median moved tenfold minutes apart). On the CPU the worker keeps each
# block's fastest call and the judge checks it, so that call is the block's time: FASTEST. On a
# GPU, where only calls drawn before the block are checked, a low quantile and not the minimum:
# a kernel fast on one call in fifty (a skipped computation it hopes nobody checks) does not set
# it. Why the minimum where it is checked: an OpenMP kernel of three parallel regions beside two
# busy loops in other sessions (sched autogroup) waits at each region's barrier for a thread out
# of its group's share; its p20 call read 0.14x eager and its fastest 0.40x, idle truth 0.43x
# (docs/loop-under-load-2026-11-27.md).
LOW_QUANTILE = 0.2
FASTEST = 0.0
# A kernel timed against its own code in another process: two worker processes running the
# same code differ by a few per cent that no spread within a judging shows (their cores, their
# buffers' placement). On this project's 2-core CPU, busy, a ReLU and an OpenMP softmax timed
# against their own code read 0.976x-1.029x, and one such judging's rank interval sat above 1x;
# on an H100 8 KernelBench kernels against themselves read 0.996x-1.001x, two of their rank
# intervals excluding 1x (docs/gpu-before-after-2026-11-27.md). Every head-to-head's interval
# is widened by this much on each side, and so is every speedup's on the CPU.
SELF_NOISE_FLOOR = 0.01     # a GPU's events (kernels alone on the device)
SELF_NOISE_FLOOR_CPU = 0.05


def block_low(samples: list[float], q: float = LOW_QUANTILE) -> float:
    """The block's `q` quantile (the lower of the two calls around it)."""
    ordered = sorted(samples)
    return ordered[int(q * (len(ordered) - 1))]


def head_to_head(rival: list[float], candidate: list[float],
                 floor: float = SELF_NOISE_FLOOR, q: float = LOW_QUANTILE) -> dict | None:
    """The candidate against the rival from their blocks' `q` quantiles (block_low), round by
    round (both in the same rounds): {"ratio": the median of rival / candidate (above 1: the
    candidate is faster), "ci", "noise": `floor`, "verdict", "stat", "rounds"}.

    "ci" is the ratio's 95 % rank interval widened on each side by `floor`: what one kernel
    timed against itself in another process shows, which no spread within a judging holds (two
    processes running the same code differ by a few per cent: their cores, their buffers'
    placement; the device's SELF_NOISE_FLOOR). "faster" when that interval lies above 1,
    "slower" below, else "tie". None without a round."""
    ratios = [r / c for r, c in zip(rival, candidate) if r > 0 and c > 0]
    if not ratios:
        return None
    point = median(ratios)
    low, high = median_interval(ratios)
    noise = floor
    low, high = low / (1 + noise), high * (1 + noise)
    verdict = "faster" if low > 1 else "slower" if high < 1 else "tie"
    return {"ratio": point, "ci": [low, high], "noise": round(noise, 4), "verdict": verdict,
            "rounds": len(ratios), "stat": low_stat(q)}


def low_stat(q: float) -> str:
    """How a block's low time was read, in words."""
    return "fastest call of each block" if q == FASTEST else f"p{q * 100:.0f} of each block"


def widened(interval, noise: float) -> list[float] | None:
    """An interval widened on each side by a relative `noise`."""
    return [interval[0] / (1 + noise), interval[1] * (1 + noise)] if interval else None


def settled(duel: dict | None, goal: float = GOAL) -> bool:
    """Whether a head-to-head needs no more rounds: decided, or its interval within ±goal."""
    if duel is None:
        return True
    width = half_width(tuple(duel["ci"]), duel["ratio"])
    return duel["verdict"] != "tie" or (width is not None and width <= goal + duel["noise"])


def hull(*intervals) -> list[float] | None:
    """The smallest interval holding every one given (None ones aside)."""
    given = [i for i in intervals if i is not None]
    if not given:
        return None
    return [min(i[0] for i in given), max(i[1] for i in given)]


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
    return True, ("the machine was busy while timing (" + "; ".join(seen) + "): noise that "
                  "only adds time; each speedup's interval spans both the blocks' medians and "
                  "their low calls (what the scheduler left alone), so it is as wide as the "
                  "load made it")
