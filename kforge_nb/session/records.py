"""What a session keeps: its budget, and one `Attempt` per evaluated candidate (its `History`)."""
from __future__ import annotations

import html
from dataclasses import dataclass

from ..agents.base import Generation, Recommendation, Usage
from ..result import CORRECT, Result
from .decisions import Decision


@dataclass
class Budget:
    iterations: int = 8
    samples: int = 1
    wall_s: float | None = None
    tokens: int | None = None
    cost_usd: float | None = None
    target_speedup: float | None = None      # stop once the best beats eager by this much
    patience: int | None = 3                 # optimisation rounds without improvement
    confirm: int | None = None               # finalists judged again at the end (None: the
    #                                          search's default, see Session.confirm_count)

    def exhausted(self, usage: Usage, elapsed_s: float, best: "Attempt | None") -> str | None:
        """Why the session must stop now, or None."""
        if self.wall_s and elapsed_s > self.wall_s:
            return f"time budget ({self.wall_s:g} s) used"
        if self.tokens and usage.input_tokens + usage.output_tokens >= self.tokens:
            return f"token budget ({self.tokens}) used"
        if self.cost_usd and usage.cost_usd >= self.cost_usd:
            return f"cost budget (${self.cost_usd:g}) used"
        t = best.result.timing if best else None
        if self.target_speedup and t and t.real and (t.speedup_vs_eager or 0) >= self.target_speedup:
            return f"target speedup {self.target_speedup:g}x reached"
        return None


@dataclass
class Attempt:
    """One evaluated candidate: where it came from and its verdict."""
    iteration: int
    sample: int
    kind: str
    code: str | None
    result: Result
    generation: Generation | None = None
    recommendation: Recommendation | None = None
    decision: Decision | None = None
    parent: str | None = None        # the id of the candidate it was made from (fixed or optimised)
    lineage: str | None = None       # the id of the first correct candidate of its line (search.py)
    applied: Recommendation | None = None   # the change it was asked to make, where it was one
    #                                  (the recommendation, an alternative, another lineage's)

    @property
    def id(self) -> str:
        """`iteration.sample`: unique in a session (hand-judged candidates take samples above
        the agent's, see Session.evaluate_code)."""
        return f"{self.iteration}.{self.sample}"

    @property
    def speed(self) -> float:
        """Lower is better; only correct candidates with a time rank. The time relative to
        eager's (1 / speedup vs eager) where the evaluator timed eager beside it: the two ran
        in alternating blocks of one evaluation, so a machine that is busier or quieter
        between evaluations does not rank one candidate above another. Else the time itself."""
        t = self.result.timing
        if self.result.state != CORRECT or t.candidate_ms is None:
            return float("inf")
        return 1.0 / t.speedup_vs_eager if t.speedup_vs_eager else t.candidate_ms

    def to_dict(self) -> dict:
        return {"iteration": self.iteration, "sample": self.sample, "kind": self.kind,
                "code": self.code, "result": self.result.to_dict(),
                "recommendation": self.recommendation.title if self.recommendation else None,
                "decision": self.decision.kind if self.decision else None,
                "decision_text": self.decision.text if self.decision else None,
                "parent": self.parent, "lineage": self.lineage,
                "applied": {"title": self.applied.title, "text": self.applied.text}
                if self.applied else None}

    def cells(self) -> list[str]:
        """id, kind, state, time and speedup (or the message's start, for a failure)."""
        t = self.result.timing
        if self.result.state == CORRECT and t.candidate_ms is not None:
            speed = f"{t.speedup_vs_eager:.2f}x vs eager" if t.speedup_vs_eager else \
                (t.note or "no speedup")
            return [self.id, self.kind, self.result.state, f"{t.candidate_ms:.4g} ms", speed]
        first = (self.result.message.splitlines() or [""])[0]
        return [self.id, self.kind, self.result.state, "-", first[:60]]

    def __repr__(self) -> str:
        return "<Attempt " + "  ".join(self.cells()) + ">"

    def _repr_html_(self) -> str:
        return _table([self])


class History(list):
    """The session's attempts, in order: a list that prints one line per attempt."""

    def __repr__(self) -> str:
        if not self:
            return "<History: no candidates yet>"
        widths = [max(len(a.cells()[k]) for a in self) for k in range(4)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(a.cells(), widths + [0])).rstrip()
                 for a in self]
        return f"<History: {len(self)} candidates>\n" + "\n".join("  " + line for line in lines)

    def _repr_html_(self) -> str:
        return _table(self) if self else "<i>no candidates yet</i>"


def _table(attempts) -> str:
    head = "".join(f"<th>{h}</th>" for h in ("id", "kind", "state", "time", "speedup / message"))
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in a.cells()) + "</tr>"
                   for a in attempts)
    return f"<table><tr>{head}</tr>{rows}</table>"
