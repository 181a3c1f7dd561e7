"""The plans of a round: what each branch asks for, from which parent, and what each of its
samples tries beside the instruction (another lineage's change, the analyst's next-ranked
change, a direction, another temperature)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..agents.base import Recommendation
from .decisions import ACCEPT, Decision
from .records import Attempt
from .search import Crossover

# Samples after the first try something else (#0 takes the instruction as it is): in an
# optimisation round the changes that made other lineages faster (evolve), then the analyst's
# next-ranked changes, else one of these directions.
DIRECTIONS = (
    "Take a different approach from the obvious one: another work decomposition (what one "
    "thread or program computes) and other block or tile sizes.",
    "Minimise memory traffic: fuse every step into as few passes over the data as possible, "
    "even at the cost of recomputing cheap values.",
    "Maximise parallelism and vector width: more, smaller units of work, wide contiguous "
    "loads and stores.",
)


@dataclass
class Plan:
    """One branch of a round, decided: what its samples are asked for, from which parent."""
    kind: str                                   # initial, fix or optimise
    base: Attempt | None                        # the parent (None: from scratch)
    recommendation: Recommendation | None = None
    decision: Decision | None = None
    instruction: str | None = None
    crossovers: list[Crossover] = field(default_factory=list)

    @property
    def seeds(self) -> bool:
        """Whether its samples are seeds (written from scratch): every one differs."""
        return self.base is None or self.kind == "initial"

    def accepted_action(self) -> dict | None:
        """The change as data, where the instruction is the analyst's recommendation as it
        came (an edit or a redirect is a person's words: the agent reads those itself)."""
        accepted = self.recommendation is not None and \
            (self.decision is None or self.decision.kind == ACCEPT)
        return dict(self.recommendation.action) or None if accepted else None

    def variation(self, variant: int) -> tuple[str, Recommendation | None]:
        """What sample `variant` of this branch tries instead of repeating sample 0, and the
        change it is asked to make where that is one (the tree's record of what worked)."""
        asked = self.recommendation is not None and \
            (self.decision is None or self.decision.kind == ACCEPT)
        if variant == 0:
            if self.recommendation is None or self.decision is None:
                return "", None
            if asked:
                return "", Recommendation(self.recommendation.title, self.recommendation.text)
            return "", Recommendation(f"your {self.decision.kind}: "
                                      f"{self.decision.text.splitlines()[0][:60]}",
                                      self.decision.text)
        if variant <= len(self.crossovers):         # only an optimise round has them
            cross = self.crossovers[variant - 1]
            return ("Instead of the recommendation above, apply this change; it made "
                    f"candidate {cross.source} {cross.gain:.2f}x faster in another lineage:\n"
                    f"{cross.change.text}"), cross.change
        variant -= len(self.crossovers)
        alternatives = self.recommendation.alternatives if asked else []
        if len(alternatives) >= variant:
            text = alternatives[variant - 1]
            return ("Instead of the recommendation above, apply this other change (the "
                    f"analyst ranked it next):\n{text}"), \
                Recommendation(text.splitlines()[0][:60], text)
        return DIRECTIONS[(variant - 1) % len(DIRECTIONS)], None


@dataclass
class Job:
    """One sample of a round: its number, its branch, its rank in the branch and its variant."""
    sample: int
    plan: Plan
    rank: int
    variant: int


def functional_plans(history: list[Attempt], width: int) -> list[Plan]:
    """No correct candidate yet: fix the last round's failures (one branch each, up to the
    search's width), or write from scratch where none has code."""
    last = [a for a in history if a.iteration == history[-1].iteration] if history else []
    failures = [a for a in reversed(last) if a.code][:width]
    if failures:
        return [Plan("fix", a) for a in failures]
    base = history[-1] if history else None   # a generation failure, or none
    return [Plan("initial", base) for _ in range(width)]


def jobs(plans: list[Plan], samples: int, history: list[Attempt],
         functional: bool) -> list[Job]:
    """The round's samples. A sample's variant says what it tries beside its branch's
    instruction; the variants are numbered across the round, and on from the earlier rounds',
    so the extra samples (a builtin knob sweep) try other knobs on each branch and in each
    round, not the sweep's first steps again. Plan.variation reads the sample's rank in its
    branch."""
    seeds_before = 0 if functional else sum(a.kind == "initial" for a in history)
    made, seeds, swept = [], 0, swept_before(history)
    for plan in plans:
        for k in range(samples):
            if plan.seeds:
                rank = variant = seeds_before + seeds
                seeds += 1
            else:
                rank, variant = k, k and k + swept
            made.append(Job(len(made), plan, rank, variant))
        if not plan.seeds:
            swept += samples - 1
    return made


def swept_before(history: list[Attempt]) -> int:
    """How many extra samples (beside each branch's first) the earlier rounds that expanded a
    candidate asked for: where this round's knob sweep goes on from."""
    parents: dict[int, list[str]] = {}
    for a in history:
        if a.kind in ("optimise", "fix") and a.parent:
            parents.setdefault(a.iteration, []).append(a.parent)
    return sum(len(ids) - len(set(ids)) for ids in parents.values())


def sample_temperature(chosen, rank: int, samples: int) -> float | None:
    """The temperature a model is asked at for the sample of rank `rank` in its branch, where
    its provider takes one: the user's list (--temperatures), cycled; else, with several
    samples, evenly from 1.0 (what a lone sample gets from OpenAI-compatible models) down to
    0.2, so that the first sample asks as one would and the others grow more careful; one
    sample: the model's default."""
    if chosen:
        return chosen[rank % len(chosen)]
    if samples < 2:
        return None
    return round(1.0 - 0.8 * (rank % samples) / (samples - 1), 3)
