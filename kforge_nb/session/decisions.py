"""Decisions on a recommendation, and the policies that make them.

The session asks its policy once per recommendation. `AutoPolicy` accepts everything (the CLI
default, `--mode auto`); `QueuePolicy` waits for a person (the notebook view's buttons,
`session.accept()`, `--review` on a terminal) and is what `--mode review` uses.
"""
from __future__ import annotations

import queue
from dataclasses import dataclass

ACCEPT, EDIT, REDIRECT, SKIP, STOP = "accept", "edit", "redirect", "skip", "stop"
DECISIONS = (ACCEPT, EDIT, REDIRECT, SKIP, STOP)


@dataclass(frozen=True)
class Decision:
    kind: str
    text: str = ""      # the edited recommendation, or the user's own instruction

    def __post_init__(self):
        if self.kind not in DECISIONS:
            raise ValueError(f"unknown decision {self.kind!r}; expected one of {DECISIONS}")
        if self.kind in (EDIT, REDIRECT) and not self.text.strip():
            raise ValueError(f"a {self.kind} decision needs text")


class AutoPolicy:
    def decide(self, recommendation) -> Decision:
        return Decision(ACCEPT)


class QueuePolicy:
    """Blocks the session until someone calls `put(Decision)` (from any thread)."""

    def __init__(self):
        self._decisions: queue.Queue[Decision] = queue.Queue()

    def put(self, decision: Decision) -> None:
        self._decisions.put(decision)

    def decide(self, recommendation) -> Decision:
        return self._decisions.get()
