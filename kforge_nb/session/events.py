"""What a Session tells its subscribers. UIs (the notebook view, CLI progress, saved report) draw these.

Every event has a `kind`, the iteration it belongs to and a JSON-able `data` dict:

  started              {"problem", "target", "device", "provider", "model", "analysis_model",
                        "iterations", "samples", "search": "greedy"|"beam"|"evolve", "width",
                        "mode", "artifacts", "timing_note", "resumed_at": the first iteration}
  iteration_started    {"phase": "functional" | "optimisation", "kind": "initial"|"fix"|"optimise",
                        "parents": the ids an optimisation round expands}
  candidate_generated  {"sample", "code", "failure", "usage": {...}, "notes", "knowledge":
                        the knowledge notes in its prompt, "variation", "temperature", "parent"}
  evaluated            {"sample", "code", "result": Result.to_dict(), "best": bool, "kind",
                        "parent": the id it was made from, "lineage", "same_as": the id of an
                        earlier candidate with its code, "tie_with": the best it tied with}
  recommendation       {"title", "text", "expected_gain", "usage": {...}, "parent": the id
                        it is about}
  decision             {"kind": "accept"|"edit"|"redirect"|"skip"|"stop", "text", "parent"}
  steer                {"action": "pin"|"unpin"|"prune"|"unprune", "id", "pinned", "pruned"}
  usage                {"input_tokens", "output_tokens", "cost_usd", "elapsed_s"}
  retry                {"service", "attempt": the try that failed, "attempts": tries allowed,
                        "reason": "timeout"|"HTTP 429"|"HTTP 529"|..., "what", "wait_s"}
  evaluation_step      {"sample", "id": the candidate's, "text": the step that ended and its
                        seconds ("built and constructed (2.1 s)", "trial 1 of 5 matches ...")}
  notice               {"text"}   (e.g. "no API key: using the builtin provider")
  duel                 {"id", "rival", "state", "versus": the head-to-head, "message", "best":
                        the best's id after it, "text"}   (two candidates timed side by side
                        again to decide between them, confirm.py)
  confirming           {"finalists": ids, "rounds"}   (the final judging begins, confirm.py)
  confirmed            {"judged": [duels], "best": id, "before": the best's id before it}
  finished             {"reason", "best": {"iteration", "sample", "code", "result"} | None,
                        "iterations", "usage": {...}, "artifacts", "advice"}

A session emits only these kinds (journal.py checks each); other runs (model/session.py) have
kinds of their own.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

KINDS = frozenset({"started", "iteration_started", "candidate_generated", "evaluated",
                   "recommendation", "decision", "steer", "usage", "notice", "retry",
                   "evaluation_step", "duel", "confirming", "confirmed", "finished"})


def checked(kind: str) -> str:
    """The kind, if it is one of KINDS: a session emitting any other is a bug."""
    if kind not in KINDS:
        raise ValueError(f"unknown event kind {kind!r} (events.KINDS lists the kinds)")
    return kind


@dataclass
class Event:
    kind: str
    iteration: int = 0
    data: dict = field(default_factory=dict)
    time: float = field(default_factory=time.time)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "iteration": self.iteration, "data": self.data,
                "time": self.time}
