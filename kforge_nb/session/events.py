"""What a Session tells its subscribers. UIs (the notebook view, CLI progress, saved report) draw these.

Every event has a `kind`, the iteration it belongs to and a JSON-able `data` dict:

  started              {"problem", "target", "device", "provider", "model", "analysis_model",
                        "iterations", "samples", "search": "greedy"|"beam"|"evolve", "width",
                        "mode", "artifacts"}
  iteration_started    {"phase": "functional" | "optimisation", "kind": "initial"|"fix"|"optimise",
                        "parents": the ids an optimisation round expands}
  candidate_generated  {"sample", "code", "failure", "usage": {...}, "notes", "knowledge":
                        the knowledge notes in its prompt, "variation", "parent"}
  evaluated            {"sample", "code", "result": Result.to_dict(), "best": bool, "kind",
                        "parent": the id it was made from, "lineage"}
  recommendation       {"title", "text", "expected_gain", "usage": {...}, "parent": the id
                        it is about}
  decision             {"kind": "accept"|"edit"|"redirect"|"skip"|"stop", "text", "parent"}
  steer                {"action": "pin"|"unpin"|"prune"|"unprune", "id", "pinned", "pruned"}
  usage                {"input_tokens", "output_tokens", "cost_usd", "elapsed_s"}
  notice               {"text"}   (e.g. "no API key: using the builtin provider")
  finished             {"reason", "best": {"iteration", "sample", "code", "result"} | None,
                        "iterations", "usage": {...}, "elapsed_s", "artifacts"}
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

KINDS = ("started", "iteration_started", "candidate_generated", "evaluated", "recommendation",
         "decision", "steer", "usage", "notice", "finished")


@dataclass
class Event:
    kind: str
    iteration: int = 0
    data: dict = field(default_factory=dict)
    time: float = field(default_factory=time.time)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "iteration": self.iteration, "data": self.data,
                "time": self.time}
