"""Repeats: code identical to an earlier candidate's, comments and blank lines aside
(records.normalised_code), is not judged again; it takes the earlier's verdict. Two samples
with the same code at once: one is judged, the other waits for its verdict.

Except where the verdict may have been wrong and a judging again can tell (`judge_again`): a
refusal an estimate made (rule `faster-than-hardware`: the measured speed of light may be
low) is judged again, and so is any other refusal or a timeout that the model asks to have
judged again (it names the candidate, or answers the fix of it with the same code, with words
such as "judge again"). At most once a round: a repeat in the same round as the code's latest
judging takes that verdict."""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from ..agents.history import ESTIMATE_RULES, named, refused_by_estimate_or_time
from ..result import GENERATION_FAILURE, REJECTED
from .records import Attempt, normalised_code

AGENT_KINDS = ("initial", "fix", "optimise")
# the words that ask for a judging again
ASKED_AGAIN = re.compile(r"\b(?:re-?judg\w*|judge[sd]? (?:\w+ )?again|judging (?:\w+ )?again|"
                         r"re-?evaluat\w*|evaluate[sd]? (?:\w+ )?again|time[sd]? (?:\w+ )?again|"
                         r"re-?time|re-?apply\w*|apply (?:\w+ )?again|wrongly refused|"
                         r"refused wrongly|false (?:refusal|positive))", re.I)


@dataclass(frozen=True)
class Asking:
    """Who wants the code judged and what they said: the round, the candidate it was made
    from, its kind, and the words of the model and the person that asked for it (the
    generation's answer, the recommendation, a person's edit, the change applied)."""
    iteration: int
    parent: str | None = None
    kind: str = ""
    words: str = ""

    @classmethod
    def of(cls, iteration: int, parent: str | None, kind: str, generation=None,
           recommendation=None, decision=None, applied=None) -> "Asking":
        said = [getattr(generation, "response", ""), getattr(recommendation, "text", ""),
                getattr(decision, "text", ""), getattr(applied, "text", "")]
        return cls(iteration, parent, kind, "\n".join(s for s in said if s))

    def asks_for(self, earlier: Attempt) -> bool:
        """Whether these words ask for `earlier` to be judged again: they say so, and name it
        (or it is the candidate this one was made from)."""
        return bool(ASKED_AGAIN.search(self.words)) and \
            (self.parent == earlier.id or named(self.words, earlier.id))


def judge_again(earlier: Attempt, asking: Asking | None) -> bool:
    """Whether code whose latest judging is `earlier` is judged again rather than taking its
    verdict: a refusal an estimate made, or another refusal or a timeout that is asked to be
    judged again; not twice in one round (a person's hand-judged repeat aside)."""
    if asking is None:
        return False
    if earlier.iteration >= asking.iteration and asking.kind in AGENT_KINDS:
        return False
    r = earlier.result
    if r.state == REJECTED and any(rule in ESTIMATE_RULES for rule in r.rules):
        return True
    return (r.state == REJECTED or refused_by_estimate_or_time(r.state, r.rules, r.error)) \
        and asking.asks_for(earlier)


class Repeats:
    def __init__(self):
        self._keys: dict[str, str | None] = {}              # attempt id -> its normalised code
        self._judging: dict[str, threading.Event] = {}      # normalised codes being judged now
        self._lock = threading.Lock()

    def claim(self, code: str, history: list[Attempt],
              asking: Asking | None = None) -> tuple[str | None, Attempt | None]:
        """(the code's normalised key, the earlier candidate judged with the same code or
        None). With None the caller judges it and then calls `done(key)`; another sample with
        the same code waits for that verdict rather than being judged beside it. Where the
        earlier verdict is to be judged again (`judge_again`, from `asking`), None too."""
        key = normalised_code(code)
        if not key:
            return key, None
        while True:
            with self._lock:
                waiting = self._judging.get(key)
                if waiting is None:
                    earlier = self._judged_with(key, history)
                    if earlier is not None and not judge_again(earlier, asking):
                        return key, earlier
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
        """The latest candidate (in the history's order) judged with this normalised code
        (not a repeat of it): without judgings again, the first and only one."""
        found = None
        for a in list(history):
            if not a.code or a.result.state == GENERATION_FAILURE or a.same_as:
                continue
            if a.id not in self._keys:
                self._keys[a.id] = normalised_code(a.code)
            if self._keys[a.id] == key:
                found = a
        return found
