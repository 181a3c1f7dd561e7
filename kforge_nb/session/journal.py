"""The session's journal: the events it tells its subscribers, in order and appended to
events.jsonl, and the files an iteration leaves in the run folder (prompts, responses, the
analyst's recommendation, the decision). Read back as it goes, it also says where the run stands:
whether a recommendation waits for a decision, whether the run has finished."""
from __future__ import annotations

import json
import threading
import traceback
from pathlib import Path
from typing import Callable

from .. import artifacts
from ..agents.base import Generation, Recommendation
from .events import Event, checked


class Journal:
    """Events and files of one run folder; its lock is its own, so sessions never wait on
    each other."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.events: list[Event] = []
        self.awaiting = False        # a recommendation emitted and not yet answered (this run)
        self.finished = False        # the `finished` event has been emitted
        self._subscribers: list[Callable[[Event], None]] = []
        self._lock = threading.Lock()

    def subscribe(self, callback: Callable[[Event], None], replay: bool = True) -> None:
        """Follow the events; a late subscriber is first shown the past ones, unless `replay`
        is False."""
        with self._lock:
            past = list(self.events) if replay else []
            self._subscribers.append(callback)
        for event in past:
            _deliver(callback, event)

    def emit(self, kind: str, iteration: int, /, **data) -> None:
        event = Event(checked(kind), iteration, data)
        with self._lock:
            self._append(event)
            with open(self.folder / "events.jsonl", "a") as f:
                f.write(json.dumps(event.to_dict(), default=str) + "\n")
        for callback in list(self._subscribers):
            _deliver(callback, event)

    def restore(self) -> None:
        """Take back a resumed run's events from events.jsonl, its old `finished` aside."""
        with self._lock:
            self.events, self.awaiting, self.finished = [], False, False
            for event in read_events(self.folder / "events.jsonl"):
                if event.kind != "finished":
                    self._append(event)

    def _append(self, event: Event) -> None:
        self.events.append(event)
        if event.kind in ("started", "decision", "finished"):
            self.awaiting = False
        if event.kind == "recommendation":
            self.awaiting = True
        if event.kind == "finished":
            self.finished = True

    # --- an iteration's files -----------------------------------------------------------------
    def save_generation(self, iteration: int, sample: int, generation: Generation) -> None:
        folder = self.folder / f"iter-{iteration:02d}" / f"sample-{sample}"
        artifacts.write_json(folder / "prompt.json", generation.messages)
        artifacts.write_text(folder / "response.md", generation.response or "")
        artifacts.write_json(folder / "generation.json", {
            "failure": generation.failure, "usage": vars(generation.usage),
            "notes": generation.notes, "kept_ops": generation.kept_ops,
            "knowledge": generation.knowledge, "variation": generation.variation,
            "temperature": generation.temperature})

    def save_repeat(self, iteration: int, sample: int, code: str, earlier) -> None:
        """A candidate whose code repeats `earlier`'s (not judged again): its code beside its
        prompt, as every candidate's folder has it, and whose verdict it took."""
        folder = self.folder / f"iter-{iteration:02d}" / f"sample-{sample}"
        artifacts.write_text(folder / "candidate.py", code)
        artifacts.write_json(folder / "same_as.json", {
            "same_as": earlier.id, "state": earlier.result.state,
            "why": f"its code repeats {earlier.id}'s (comments and blank lines aside): not "
                   f"judged again, it takes that verdict",
            "verdict": f"iter-{earlier.iteration:02d}/sample-{earlier.sample}/result.json"})

    def save_recommendation(self, iteration: int, slot: int, parent: str,
                            recommendation: Recommendation, summary: dict) -> None:
        """The analyst's answer beside what it was shown (the profile summary, the pictures)."""
        self.save_json(iteration, slot_file("recommendation.json", slot), {
            "parent": parent,
            "title": recommendation.title, "text": recommendation.text,
            "expected_gain": recommendation.expected_gain, "action": recommendation.action,
            "summary": summary, "messages": recommendation.messages,
            "response": recommendation.response,
            "images": [slot_file(picture.file_name, slot)
                       for picture in recommendation.pictures]})
        for picture in recommendation.pictures:
            artifacts.write_bytes(self.folder / f"iter-{iteration:02d}" /
                                  slot_file(picture.file_name, slot), picture.png)

    def save_json(self, iteration: int, name: str, data: dict) -> None:
        artifacts.write_json(self.folder / f"iter-{iteration:02d}" / name, data)


def slot_file(name: str, slot: int) -> str:
    """A round's files for its first branch keep their names; the others' carry the slot."""
    if slot == 0:
        return name
    stem, dot, suffix = name.rpartition(".")
    return f"{stem}-{slot}{dot}{suffix}" if dot else f"{name}-{slot}"


def _deliver(callback, event: Event) -> None:
    try:
        callback(event)
    except Exception:  # a broken view must not stop the session
        traceback.print_exc()


def read_events(path: Path) -> list[Event]:
    """A saved events.jsonl; a line cut by a kill is dropped (and the file mended so the next
    event starts on a line of its own)."""
    if not path.is_file():
        return []
    text = path.read_text(errors="replace")
    events = []
    for line in text.splitlines():
        try:
            d = json.loads(line)
            events.append(Event(d["kind"], d.get("iteration", 0), d.get("data", {}),
                                d.get("time", 0.0)))
        except (ValueError, KeyError, TypeError):
            continue
    if text and not text.endswith("\n"):
        with open(path, "a") as f:
            f.write("\n")
    return events
