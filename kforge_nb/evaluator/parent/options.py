"""EvalOptions: what one judging is asked to do (trials, limits, precision, guardrails, timing,
profiles) and the inputs its trials and timed calls draw."""
from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass, field
from pathlib import Path

from ...guardrails import Guardrails
from ...options import DEFAULT_PRECISION
from ..worker.harness import RESCALED
from .process import default_memory_limit
from ..worker.trial_values import TAILS


@dataclass
class EvalOptions:
    trials: int = 5
    timeout_s: float = 180.0
    memory_bytes: int = field(default_factory=default_memory_limit)
    precision: str = DEFAULT_PRECISION
    guardrails: Guardrails = field(default_factory=Guardrails)
    baselines: tuple[str, ...] = ("eager", "compile")
    compile_mode: str = "default"   # torch.compile's mode for the "compile" baseline
    #                                 (--baseline, kforge_nb/baselines.py)
    measure: bool = True            # time and profile correct candidates
    shape_check: bool = True        # one extra trial at another batch size
    seed: int = 0
    out_dir: str | Path = "kforge-runs"
    timing_budget_s: float = 1.0    # for the interleaved timing rounds, both sides together
    timing_rounds: int = 6          # the fewest interleaved rounds (more until the interval
    #                                 of the speedup is within ±5 %, or the time cap)
    sandbox: bool = True            # --no-sandbox turns it off (and every verdict says so)
    # Nsight Compute's counters of a correct candidate, where ncu can profile (nsight.py). They
    # cost ~13 s a candidate on an H100 and only an analyst reads them, so a session asks for
    # them, and only for a candidate at least `ncu_over` times faster than eager (its parent's
    # speedup: the analyst reads a lineage's best)
    ncu: bool = False
    ncu_over: float | None = None
    # --measure FILE.py: the hook's source (read in the parent, run only in the workers) and
    # its file; --objective NAME[:min|max], which the session ranks by (kforge_nb/measures.py)
    measure_hook: str = ""
    measure_label: str = ""
    objective: str = ""
    # the best candidate so far (its code and id), timed beside this one in the same rounds:
    # the head-to-head the session decides with (rival.py, Timing.versus); "" for none
    rival: str = ""
    rival_id: str = ""

    def trial_plan(self, secret: int = 0) -> list[dict]:
        """The trials' inputs. Every seed is drawn from `secret`, a number drawn for each
        evaluation that the candidate cannot predict (answers computed ahead for seeds 0..5
        were served once), as the timed calls' seeds are: no seed tells a trial from the next
        one or from a timed call (consecutive seeds did, and a timed call's 2**20 + k). One
        trial is drawn as a timed call is (`rescaled`), so no statistic of the values does."""
        distributions = ["given", RESCALED, "scaled", "uniform", TAILS]   # then given
        seeds = drawn(self.seed, secret, "trials")
        plan = [{"seed": next(seeds), "trial": i + 1,
                 "distribution": distributions[i] if i < len(distributions) else "given"}
                for i in range(max(1, self.trials))]
        if self.shape_check:
            plan.append({"seed": next(seeds), "trial": len(plan) + 1,
                         "distribution": "given", "batch": "auto"})
        return plan

    def timing_sets(self, input_bytes: int, secret: int = 0) -> list[dict]:
        """Input sets the timed calls rotate over: three, fewer when inputs are large (each set
        is held twice on each side: its pristine values and the refreshed copy). Each names
        the key every timed call's refresh and seed are drawn from (harness.Refresh)."""
        count = 3 if input_bytes <= 256 << 20 else 2 if input_bytes <= 1 << 30 else 1
        seeds = drawn(self.seed, secret, "timing")
        key = next(seeds)
        return [{"seed": next(seeds), "distribution": "given", "key": key}
                for _ in range(count)]

    def seed_for(self, secret: int, purpose: str) -> int:
        """One more seed drawn from `secret`, for inputs outside the trials and the timing
        (the call Nsight Compute profiles)."""
        return next(drawn(self.seed, secret, purpose))


def drawn(seed: int, secret: int, purpose: str):
    """Seeds (62-bit) for `purpose`, each a keyed hash of (seed, secret): independent of one
    another to anyone without the secret."""
    for i in itertools.count():
        digest = hashlib.blake2b(f"{seed}:{secret}:{purpose}:{i}".encode(), digest_size=8)
        yield int.from_bytes(digest.digest(), "little") >> 2
