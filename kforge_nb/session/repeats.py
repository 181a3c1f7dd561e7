"""Repeats: code identical to an earlier candidate's, comments and blank lines aside
(records.normalised_code), is not judged again; it takes the earlier's verdict. Two samples
with the same code at once: one is judged, the other waits for its verdict."""
from __future__ import annotations

import threading

from ..result import GENERATION_FAILURE
from .records import Attempt, normalised_code


class Repeats:
    def __init__(self):
        self._keys: dict[str, str | None] = {}              # attempt id -> its normalised code
        self._judging: dict[str, threading.Event] = {}      # normalised codes being judged now
        self._lock = threading.Lock()

    def claim(self, code: str, history: list[Attempt]) -> tuple[str | None, Attempt | None]:
        """(the code's normalised key, the earlier candidate judged with the same code or
        None). With None the caller judges it and then calls `done(key)`; another sample with
        the same code waits for that verdict rather than being judged beside it."""
        key = normalised_code(code)
        if not key:
            return key, None
        while True:
            with self._lock:
                earlier = self._judged_with(key, history)
                if earlier is not None:
                    return key, earlier
                waiting = self._judging.get(key)
                if waiting is None:
                    self._judging[key] = threading.Event()
                    return key, None
            waiting.wait()

    def done(self, key: str | None) -> None:
        """The code of this key is judged (or failed to be): its waiters go on."""
        with self._lock:
            judged = self._judging.pop(key, None)
        if judged is not None:
            judged.set()

    def forget(self) -> None:
        """Drop the keys cached by attempt id (a resumed session's history is a new one)."""
        self._keys = {}

    def _judged_with(self, key: str, history: list[Attempt]) -> Attempt | None:
        """The first candidate (in the history's order) judged with this normalised code."""
        for a in list(history):
            if not a.code or a.result.state == GENERATION_FAILURE:
                continue
            if a.id not in self._keys:
                self._keys[a.id] = normalised_code(a.code)
            if self._keys[a.id] == key:
                return a
        return None
