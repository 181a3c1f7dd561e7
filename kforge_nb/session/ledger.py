"""The budget ledger: what a session has spent against its budget (tokens, cost, wall time),
and the reservations that keep concurrent calls from overshooting it. Its lock is its own."""
from __future__ import annotations

import threading
import time
from typing import Callable

from ..agents.base import Usage
from .records import Attempt, Budget


class Ledger:
    def __init__(self, budget: Budget, clock: Callable[[], float] = time.monotonic):
        self.budget = budget
        self.usage = Usage()
        self.elapsed_before = 0.0            # run time of the earlier runs of a resumed session
        self._clock = clock                  # wall-time budget; tests pass a scripted clock
        self._started: float | None = None
        self._in_flight = 0                  # generation calls under way (budget reservations)
        self._largest = Usage()              # the largest single call so far, as an estimate
        self._lock = threading.Lock()

    # --- time ---------------------------------------------------------------------------------
    def start(self) -> None:
        self._started = self._clock()

    def elapsed(self) -> float:
        """Seconds this session has run, the earlier runs of a resumed one included."""
        now = self._clock() - self._started if self._started is not None else 0.0
        return self.elapsed_before + now

    def deadline(self) -> float | None:
        """When the wall-time budget ends, on time.monotonic()'s scale (what providers use to
        decide whether another retry fits)."""
        if not self.budget.wall_s:
            return None
        return time.monotonic() + max(0.0, self.budget.wall_s - self.elapsed())

    # --- tokens and cost ----------------------------------------------------------------------
    def restore(self, usage: Usage, elapsed_before: float) -> None:
        self.usage, self._largest, self.elapsed_before = usage, Usage(), elapsed_before

    def add(self, usage: Usage) -> None:
        """Count a finished call (samples of one round finish on several threads)."""
        with self._lock:
            self.usage = self.usage + usage
            self._largest = max(self._largest, usage, key=_call_size)

    @property
    def sized(self) -> bool:
        """Whether a call has been counted: the size the others reserve is known."""
        return bool(self._largest.calls)

    def reserve(self) -> bool:
        """Count one more call in flight if the budget covers it and every call already in
        flight, each reckoned as large as the largest call so far: N concurrent samples
        cannot overshoot a token or cost budget by N-1 calls."""
        with self._lock:
            calls = self._in_flight + 1
            big = self._largest
            projected = Usage(self.usage.input_tokens + calls * big.input_tokens,
                              self.usage.output_tokens + calls * big.output_tokens,
                              self.usage.cost_usd + calls * big.cost_usd)
            if self.budget.exhausted(projected, 0.0, None) and (big.calls or self._in_flight):
                return False
            self._in_flight += 1
            return True

    def release(self) -> None:
        with self._lock:
            self._in_flight -= 1

    # --- verdicts -----------------------------------------------------------------------------
    def exhausted(self, best: Attempt | None) -> str | None:
        """Why the session must stop now, or None (see Budget.exhausted)."""
        return self.budget.exhausted(self.usage, self.elapsed(), best)

    def too_small(self) -> str:
        """Why a call was not reserved."""
        big, b = self._largest, self.budget
        if b.tokens and self.usage.input_tokens + self.usage.output_tokens + \
                big.input_tokens + big.output_tokens >= b.tokens:
            return (f"token budget ({b.tokens}) would not cover another call "
                    f"({big.input_tokens + big.output_tokens} tokens, the largest so far)")
        return (f"cost budget (${b.cost_usd:g}) would not cover another call "
                f"(${big.cost_usd:.4f}, the largest so far)")

    def as_dict(self) -> dict:
        """The `usage` event's data."""
        return {"input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
                "cost_usd": round(self.usage.cost_usd, 6),
                "elapsed_s": round(self.elapsed(), 2)}


def _call_size(usage: Usage) -> tuple:
    return usage.input_tokens + usage.output_tokens, usage.cost_usd
