"""The verdict on one candidate: the one place that names states and the result schema.

Everything downstream (CLI `--json`, artifacts, the session history, the notebook report)
serialises a `Result` through `to_dict()`, so the schema lives here and nowhere else.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any
from .baselines import long_name
from .intervals import decided, own_time_text, shown_speedup, speedup_text, versus_text

SCHEMA_VERSION = 2

# The execution states of evaluation.md, in the order a candidate can reach them.
GENERATION_FAILURE = "generation_failure"  # no usable code in the response
REJECTED = "rejected"                      # a guardrail fired (named in `rules`)
COMPILE_FAILURE = "compile_failure"
RUNTIME_ERROR = "runtime_error"            # exception, crash signal, timeout, out of memory
MISMATCH = "mismatch"                      # shape, dtype or values
CORRECT = "correct"
UNAVAILABLE = "unavailable"                # the target cannot run on this host; candidate kept

STATES = (GENERATION_FAILURE, REJECTED, COMPILE_FAILURE, RUNTIME_ERROR, MISMATCH, CORRECT,
          UNAVAILABLE)


@dataclass
class Correctness:
    trials: int = 0
    passed_trials: int = 0
    shape: list[int] | None = None           # reference output shape (first output)
    dtype: str | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    rel_norm_error: float | None = None      # ||c - r|| / ||r||, guards near-zero outputs
    mismatch_fraction: float | None = None
    worst: list[dict] = field(default_factory=list)   # [{"index": [...], "got", "expected"}]
    tolerance: dict = field(default_factory=dict)     # atol, rtol, rel_norm, policy
    failed_check: str | None = None          # which trial / distribution / shape failed
    error_map: dict | None = None            # downsampled |c - r| for a heat map


@dataclass
class Timing:
    real: bool = False                 # False: interpreter or no timing at all
    note: str = ""                     # why a timing is not a performance figure
    device: str = ""
    candidate_ms: float | None = None
    eager_ms: float | None = None
    compile_ms: float | None = None
    candidate_spread: float | None = None   # (p75 - p25) / median
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    # torch.compile's mode behind compile_ms and speedup_vs_compile ("default", "max-autotune":
    # --baseline; None where compile was not timed, and in records older than the field)
    compile_mode: str | None = None
    repeats: int = 0
    rechecked: bool = False            # a >10x speedup was timed again
    # schema 2: the speedup is the median of paired ratios, reference and candidate timed in
    # alternating blocks over rotating input sets; compile_ms is a cached display
    speedup_spread: float | None = None     # (p75 - p25) / median of the paired ratios
    rounds: int = 0                    # alternating blocks per side
    input_sets: int = 0                # distinct input sets the timed calls rotated over
    # under --precision tf32/bf16/fp16 (None under strict): the reference as a user would run it
    # under that policy, e.g. "bf16 (autocast)" (evaluator/worker/policy.py). Its eager time is a
    # third side of the same interleaved rounds (a median of paired ratios); torch.compile a cached
    # display. The fields above stay the fp32 figures; the trials always compare against fp32.
    policy: str | None = None
    eager_policy_ms: float | None = None
    compile_policy_ms: float | None = None
    speedup_vs_eager_policy: float | None = None
    speedup_vs_compile_policy: float | None = None
    # every speedup is an interval: a 95 % interval [low, high] over the paired ratios of the
    # interleaved rounds (None where there is no timing); `noisy`: it stayed wider than the
    # goal when the rounds ran out, and `noise_note` says so in a sentence
    speedup_vs_eager_ci: list[float] | None = None
    speedup_vs_compile_ci: list[float] | None = None
    noisy: bool = False
    noise_note: str = ""
    # the machine was busy while timing (load against cores, the worker's CPU time against
    # wall time, involuntary context switches): `busy_note` says what was seen
    busy: bool = False
    busy_note: str = ""
    # a torch.compile figure from another moment: shown with its age, never in a ratio
    compile_cached_ms: float | None = None
    compile_cached_age_s: float | None = None
    # the head-to-head against the best of its time, timed in the same rounds (session/standing.py
    # decides with it): {"id", "ratio" (the rival's time / this one's), "ci", "noise", "verdict"
    # ("faster" | "slower" | "tie"), "stat", "rounds"}; None where there was no rival
    versus: dict | None = None
    # the median over rounds of each block's low calls (stats.block_low): the candidate's own
    # time with the noise a contested CPU adds mostly left out
    candidate_low_ms: float | None = None


@dataclass
class Roofline:
    flops: int | None = None
    min_bytes: int | None = None
    device: str = ""
    peak_flops: float | None = None
    peak_bandwidth: float | None = None
    speed_of_light_ms: float | None = None
    fraction_of_sol: float | None = None   # speed_of_light_ms / candidate_ms
    bound: str | None = None               # "memory" or "compute"
    # above 1: the measured ceiling is too low (an honest kernel cannot beat the hardware);
    # views cap the bar at 100 % and say "ceiling underestimated"
    ceiling_exceeded: bool = False
    # where each ceiling came from: "guaranteed" (the ISA's or the datasheet's peak, which no
    # kernel exceeds: above 1 there, the reference's FLOPs overstate the work needed) or
    # "measured" (a probe, which a kernel may beat); "" in records older than these fields
    peak_flops_source: str = ""
    peak_bandwidth_source: str = ""


@dataclass
class Result:
    state: str
    message: str
    target: str = ""
    rules: list[str] = field(default_factory=list)     # guardrail rules that fired
    error: dict | None = None                          # kind, text, line, source_line
    correctness: Correctness = field(default_factory=Correctness)
    timing: Timing = field(default_factory=Timing)
    roofline: Roofline = field(default_factory=Roofline)
    profile: dict = field(default_factory=dict)        # candidate/reference kernel events, trace paths
    artifacts: str | None = None                       # folder holding this evaluation's files
    elapsed_s: float | None = None
    # where the candidate ran: {"enabled", "env", "network", "filesystem", "processes"}, each
    # saying what this host allowed (see evaluator/sandbox/layout.py)
    sandbox: dict = field(default_factory=dict)
    # peak resident host memory of the two workers, and the problem's own input bytes
    resources: dict = field(default_factory=dict)
    # where it was judged: "" in this process, else the worker (local process or Dask worker)
    worker: str = ""
    # your own measurement (--measure FILE.py), correct candidates only: {"hook": its file,
    # "reference": {name: value}, "candidate": {...}, "ratio": {name: candidate / reference},
    # "error": what went wrong, when something did (see kforge_nb/measures.py)}
    measures: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.state not in STATES:
            raise ValueError(f"unknown state {self.state!r}; expected one of {STATES}")

    @property
    def ok(self) -> bool:
        return self.state == CORRECT

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Result":
        data = {k: v for k, v in data.items() if k != "schema_version"}
        parts = {"correctness": Correctness, "timing": Timing, "roofline": Roofline}
        for key, kind in parts.items():
            if isinstance(data.get(key), dict):   # fields of schema 1 and 2 alike
                known = {f.name for f in dataclasses.fields(kind)}
                data[key] = kind(**{k: v for k, v in data[key].items() if k in known})
        return cls(**data)

    def summary(self) -> str:
        """A few lines a person reads first (and the hook's measures, when there are): the
        state and message, then `timing_lines`."""
        hook = f"\n  {measures_line(self.measures)}" if self.measures else ""
        return "\n  ".join([f"{self.state}: {self.message}", *self.timing_lines()]) + hook

    def timing_lines(self) -> list[str]:
        """A correct candidate's figures in lines: its time, the speedups side by side with
        their intervals, and its head-to-head with the best of its time where it had one. On a
        busy CPU it leads with the candidate's own time and that head-to-head (what decides);
        the ratio to eager, whose own time swings under load, comes after with its interval
        written out. [] for other states or without a time."""
        t = self.timing
        if self.state != CORRECT or t.candidate_ms is None:
            return []
        if not t.real:   # no speedups from a time that is not a performance figure
            return [f"candidate {t.candidate_ms:.4g} ms ({t.note})"]
        versus = "" if not t.versus else versus_text(t.versus, named=True) \
            if not decided(t.versus) else f"head-to-head with {t.versus['id']} (the best " \
            f"when it was judged, timed in the same rounds): {versus_text(t.versus)}"
        if t.busy:
            eager = f" (eager's blocks' median {t.eager_ms:.4g} ms: it carries the load)" \
                if t.eager_ms is not None else ""
            speeds = ", ".join(speedup_parts(t))
            lines = [f"candidate {own_time_text(t)}", versus, speeds + eager if speeds else ""]
        else:
            lines = [", ".join([f"candidate {t.candidate_ms:.4g} ms", *speedup_parts(t)]),
                     versus]
        if t.policy:
            lines.append(policy_line(t))
        if t.noisy and t.noise_note:
            lines.append(f"noisy: {t.noise_note}")
        if t.busy and t.busy_note:
            lines.append(f"busy: {t.busy_note}")
        return [line for line in lines if line]


def speedup_parts(t: Timing) -> list[str]:
    """"eager 1 ms (1.60x ±6% side by side)", torch.compile's alike or cached; on a busy CPU
    "5.00x (95 % interval 2-20x) vs eager side by side" (intervals.shown_speedup)."""
    parts = []
    if t.speedup_vs_eager is not None and (t.busy or t.eager_ms is not None):
        parts.append(f"{shown_speedup(t, mark_noise=False)} vs eager side by side" if t.busy else
                     f"eager {t.eager_ms:.4g} ms "
                     f"({speedup_text(t.speedup_vs_eager, t.speedup_vs_eager_ci)} side by side)")
    if t.speedup_vs_compile is not None and (t.busy or t.compile_ms is not None):
        compiled = long_name(t.compile_mode)
        parts.append(f"{shown_speedup(t, 'compile', mark_noise=False)} vs {compiled} side "
                     "by side" if t.busy else
                     f"{compiled} {t.compile_ms:.4g} ms "
                     f"({speedup_text(t.speedup_vs_compile, t.speedup_vs_compile_ci)} "
                     "side by side)")
    elif t.compile_cached_ms is not None:
        parts.append(f"torch.compile {t.compile_cached_ms:.4g} ms cached "
                     f"{age_text(t.compile_cached_age_s)} ago (not a ratio)")
    return parts


def age_text(seconds: float | None) -> str:
    if seconds is None:
        return "some time"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def policy_line(t: Timing) -> str:
    """"under bf16 (autocast): eager 0.41 ms (1.05x), torch.compile 0.30 ms (0.77x)"."""
    parts = [f"{name} {ms:.4g} ms ({speedup:.2f}x)" for name, ms, speedup in (
        ("eager", t.eager_policy_ms, t.speedup_vs_eager_policy),
        (long_name(t.compile_mode), t.compile_policy_ms, t.speedup_vs_compile_policy))
        if ms is not None and speedup is not None]
    return f"under {t.policy}" + (": " + ", ".join(parts) if parts else "")


def measures_line(measures: dict) -> str:
    """Result.measures in one line: "measure (hook.py): tokens_per_s candidate 1.2e+04,
    reference 1e+04 (1.20x)"."""
    cand, ref = measures.get("candidate") or {}, measures.get("reference") or {}
    ratio = measures.get("ratio") or {}
    num = lambda v: "-" if v is None else f"{v:.6g}"  # noqa: E731
    parts = [f"{key} candidate {num(cand.get(key))}, reference {num(ref.get(key))}"
             + (f" ({ratio[key]:.2f}x)" if key in ratio else "")
             for key in dict.fromkeys([*cand, *ref])]
    hook = (measures.get("hook") or "hook").replace("\\", "/").rsplit("/", 1)[-1]
    line = f"measure ({hook}): " + ("; ".join(parts) or "no values")
    return line + (f"; error: {measures['error']}" if measures.get("error") else "")
