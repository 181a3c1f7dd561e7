"""Which candidates an optimisation round expands: the search strategy (`--search`).

The session's attempts form a tree: each candidate records its parent (the one it was fixed or
optimised from) and its lineage (the first correct candidate of its line; a correct candidate
whose parent is not correct starts a lineage of its own). Once a correct candidate exists, each
round asks the strategy for its branches, at most `width` (`--beam K`) of them; the session
asks the analyst about each branch's parent and generates `--samples` children per branch.

    greedy  the best correct candidate: a climb from the single best (width 1)
    beam    the best candidate of each of the K best lineages, so K lines are kept apart
            rather than K neighbours of one winner; a slot no lineage fills seeds a new one
    evolve  K parents drawn by tournament from the whole population (every correct candidate),
            so good but not best candidates are expanded too; beside the analyst's
            recommendation, a parent's other samples apply changes that made another lineage
            faster (recombination); a short population is topped up with new seeds

A candidate whose code repeats an earlier one's (Attempt.same_as) is never expanded: the earlier
is. A person steers every strategy: a pinned candidate is always expanded (before the strategy's
own choices), a pruned one and everything descended from it never are. The budgets (rounds,
tokens, cost, wall time, patience) hold for the whole search, not per branch.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from .. import intervals
from ..agents.base import Recommendation
from ..problem import ProblemError
from ..result import CORRECT
from .records import Attempt
from ..intervals import DECIDED

STRATEGIES = ("greedy", "beam", "evolve")


class SearchError(ProblemError):
    """A bad --search or --beam: reported like any bad input (exit 2, one line)."""

IMPROVED = 0.98          # a child counts as an improvement when it takes under 98 % of the time


@dataclass(frozen=True)
class Crossover:
    """A change that made a candidate of another lineage faster, to try on this one."""
    change: Recommendation
    source: str              # the candidate it made faster
    gain: float              # its parent's time / its time


@dataclass
class Branch:
    """One parent to expand this round (None: a new seed, generated from scratch) and, for
    evolve, the changes from other lineages its extra samples try."""
    parent: Attempt | None
    crossovers: list[Crossover] = field(default_factory=list)


class Tree:
    """The session's attempts as a search tree, with what the person pinned and pruned."""

    def __init__(self, attempts: list[Attempt], pinned=(), pruned=(), finished=()):
        self.attempts = list(attempts)
        self.by_id = {a.id: a for a in self.attempts}
        self.pinned, self.pruned, self.finished = set(pinned), set(pruned), set(finished)

    def parent(self, attempt: Attempt) -> Attempt | None:
        return self.by_id.get(attempt.parent) if attempt.parent else None

    def path(self, attempt: Attempt) -> list[Attempt]:
        """The attempt and its ancestors, nearest first (a cycle cannot occur: a parent is
        always judged before its child; the guard is for hand-edited run folders)."""
        out, seen = [], set()
        while attempt is not None and attempt.id not in seen:
            out.append(attempt)
            seen.add(attempt.id)
            attempt = self.parent(attempt)
        return out

    def lineage_of(self, attempt: Attempt) -> str | None:
        """Its nearest correct ancestor's lineage; its own id if it is the first correct one."""
        for node in self.path(attempt)[1:]:
            if node.result.state == CORRECT:
                return node.lineage or node.id
        return attempt.id if attempt.result.state == CORRECT else None

    def blocked(self, attempt: Attempt) -> bool:
        """Pruned, or descended from a pruned candidate."""
        return any(node.id in self.pruned for node in self.path(attempt))

    def population(self) -> list[Attempt]:
        """The correct candidates the search may still expand."""
        return [a for a in self.attempts if a.result.state == CORRECT and not a.same_as
                and a.id not in self.finished and not self.blocked(a)]

    def children(self, attempt: Attempt) -> list[Attempt]:
        return [a for a in self.attempts if a.parent == attempt.id]

    def tried(self, attempt: Attempt) -> list[str]:
        """The titles of the changes made along its line and already tried on it: what the
        analyst should not recommend for it again."""
        titles = [node.recommendation.title for node in self.path(attempt)
                  if node.recommendation]
        titles += [child.recommendation.title for child in self.children(attempt)
                   if child.recommendation]
        return list(dict.fromkeys(titles))

    def improvements(self) -> list[tuple[Attempt, float]]:
        """Children that applied a change and beat their correct parent, with the gain: under
        IMPROVED of its time and, where both speedups have intervals, intervals that separate
        (a tie is no improvement); where the child was timed beside its parent, that
        head-to-head says, and its ratio is the gain."""
        out = []
        for child in self.attempts:
            parent = self.parent(child)
            if child.applied is None or parent is None or parent.result.state != CORRECT \
                    or child.result.state != CORRECT:
                continue
            versus = child.result.timing.versus or {}
            if versus.get("id") == parent.id and versus.get("verdict") in DECIDED:
                if versus["verdict"] == "faster":        # timed side by side with its parent
                    out.append((child, versus["ratio"]))
            elif child.speed < parent.speed * IMPROVED and intervals.compare(
                    child.result.timing, parent.result.timing) == "better":
                out.append((child, parent.speed / child.speed))
        return sorted(out, key=lambda pair: -pair[1])


class Greedy:
    name = "greedy"

    def __init__(self, width: int = 1, seed: int = 0):
        self.width, self.seed = 1, seed

    def branches(self, tree: Tree, rank, iteration: int) -> list[Branch]:
        # the finished are not left out here: when the analyst has nothing more for the best,
        # the climb ends rather than going back down to the second best
        correct = sorted((a for a in tree.attempts if a.result.state == CORRECT
                          and not a.same_as and not tree.blocked(a)), key=rank)
        pinned = [a for a in correct if a.id in tree.pinned]
        chosen = (pinned or correct)[:1]
        return [Branch(a) for a in chosen if a.id not in tree.finished]

    def tried(self, tree: Tree, attempt: Attempt) -> list[str]:
        # the greedy climb never goes back: what was tried from any earlier best is not asked
        # for again (the behaviour of the loop before strategies)
        return list(dict.fromkeys(a.recommendation.title for a in tree.attempts
                                  if a.recommendation))


class Beam(Greedy):
    name = "beam"

    def __init__(self, width: int = 2, seed: int = 0):
        self.width, self.seed = width, seed

    def branches(self, tree: Tree, rank, iteration: int) -> list[Branch]:
        population = sorted(tree.population(), key=rank)
        chosen = [a for a in population if a.id in tree.pinned][:self.width]
        lineages = {a.lineage for a in chosen}
        for a in population:                     # the best of each lineage, best lineage first
            if len(chosen) >= self.width:
                break
            if a.lineage not in lineages:
                chosen.append(a)
                lineages.add(a.lineage)
        return [Branch(a) for a in chosen] + self.seeds(tree, self.width - len(chosen))

    @staticmethod
    def seeds(tree: Tree, free: int) -> list[Branch]:
        # a slot no lineage fills grows a new one, but not after a seed has come back wrong:
        # the functional pass found that hard, so the slot goes to the lineages there are
        failed_seed = any(a.parent is None and a.kind == "initial" and
                          a.result.state != CORRECT and a.iteration > 0 for a in tree.attempts)
        return [] if failed_seed else [Branch(None) for _ in range(max(0, free))]

    def tried(self, tree: Tree, attempt: Attempt) -> list[str]:
        return tree.tried(attempt)


class Evolve(Beam):
    name = "evolve"
    TOURNAMENT = 2

    def branches(self, tree: Tree, rank, iteration: int) -> list[Branch]:
        population = sorted(tree.population(), key=rank)
        chosen = [a for a in population if a.id in tree.pinned][:self.width]
        # the draw is seeded by the run's seed and the round: a run is repeatable
        chooser = random.Random(f"{self.seed}:{iteration}")
        pool = [a for a in population if a not in chosen]
        while len(chosen) < self.width and pool:
            entrants = chooser.sample(pool, min(self.TOURNAMENT, len(pool)))
            winner = min(entrants, key=rank)
            chosen.append(winner)
            pool.remove(winner)
        improvements = tree.improvements()
        branches = []
        for parent in chosen:
            tried, crossovers = set(tree.tried(parent)), {}
            for child, gain in improvements:        # best gain first; one per change
                if child.lineage != parent.lineage and child.applied.title not in tried:
                    crossovers.setdefault(child.applied.title,
                                          Crossover(child.applied, child.id, gain))
            branches.append(Branch(parent, list(crossovers.values())))
        return branches + self.seeds(tree, self.width - len(chosen))


def make_search(strategy: str = "greedy", width: int | None = None, seed: int = 0):
    """The strategy called `strategy`, expanding `width` parents a round (beam and evolve)."""
    kinds = {"greedy": Greedy, "beam": Beam, "evolve": Evolve}
    if strategy not in kinds:
        raise SearchError(f"unknown search {strategy!r}; expected one of {', '.join(STRATEGIES)}")
    if width is not None and width < 1:
        raise SearchError(f"--beam must be at least 1, not {width}")
    if strategy == "greedy":
        if width not in (None, 1):
            raise SearchError(f"--beam {width} needs --search beam or evolve (greedy expands "
                             "one candidate a round)")
        return Greedy(1, seed)
    return kinds[strategy](width or 2, seed)
