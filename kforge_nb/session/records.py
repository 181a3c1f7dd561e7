"""What a session keeps: its budget, and one `Attempt` per evaluated candidate."""
from __future__ import annotations

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

    @property
    def speed(self) -> float:
        """Lower is better; only correct candidates with a time rank."""
        ms = self.result.timing.candidate_ms
        return ms if (self.result.state == CORRECT and ms is not None) else float("inf")

    def to_dict(self) -> dict:
        return {"iteration": self.iteration, "sample": self.sample, "kind": self.kind,
                "code": self.code, "result": self.result.to_dict(),
                "recommendation": self.recommendation.title if self.recommendation else None,
                "decision": self.decision.kind if self.decision else None,
                "decision_text": self.decision.text if self.decision else None}
