"""Record every request and response of a live session; replay them without a network.

A recording is JSON lines, one call per line: {"call", "role", "request": {...}, "reply": {...}}.
It holds prompts and answers only, never credentials; the analyst's pictures are kept whole,
as base64 image blocks. Replay checks each request against the recorded one and says where a
run diverges or runs out.
"""
from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import asdict, fields
from pathlib import Path

from ..machine import SECTION as MACHINE_SECTION
from .base import ProviderError, Reply, sampling


UNIT = r"\s?(?:%|x\b|ms\b|us\b|s\b|[KMGT]?B/s|[KMGTP]?FLOP/s)"
# a decimal (with its unit, if any), or a whole number that has a unit
MEASUREMENT = re.compile(rf"(?:\d+\.\d+(?:e[-+]?\d+)?(?:{UNIT})?|\d+(?:e[-+]?\d+)?{UNIT}|n/a)")
# the machine, as devices.py names it: a class replays a teacher's recording on other machines
DEVICE = re.compile(r"CPU \(\d+ cores?, \d+ threads?\)(?: \(in cache\))?|NVIDIA [^\n,;()]*")

# What a measurement decides: which candidate was kept, which is the best now. Two runs of one
# session time their candidates differently, so these words (and the sentences and the section
# that are there only when nothing was kept) differ where the code does not. A replay compares
# prompts without them (normalised, below); every such phrase agents/history.py writes is
# matched here (tests/test_machine_and_history.py flips which candidate won and compares).
# "kept as the best" and "not kept" go with the head-to-head that decided them, where there was
# one (agents/history.py versus_text: "not kept: 12 % slower than 0.0 timed side by side (...)",
# "...: a tie with 0.0 timed side by side (...)"), and with "refused" where a timing refused it.
STANDING_WORDS = re.compile(r"(?:kept as the best|not kept)(?:: refused|: [^;\n]*? timed side "
                            r"by side \([^)\n]*\))?|the best so far"
                            r"|not the best now; the search expands it too")
# the sentences and sections there only where a measurement said so: "; the best now", the
# changes not kept, why the analyst sees a candidate again, the candidates refused by an estimate
# or a timeout it may have judged again, and the profile note (a profiled call far from the
# timed median, evaluator/parent/figures.py profile_note)
STANDING_TEXT = re.compile(r"; the best now| Earlier changes to it were not kept: [^\n]*"
                           r"|\n## Why you see \S+ again\n.*?(?=\n## |\Z)"
                           r"|\n[^\n]* refused by an estimate or a timeout, not by its output: "
                           r"[^\n]*|\nProfile note: [^\n]*", re.S)

# What the machine's measured ceilings decide: whether a candidate is memory- or compute-bound
# (devices.roofline: the larger of its bytes over the probed bandwidth and its FLOPs over the
# compute peak). A problem near the ridge point is one on a teacher's machine and the other on
# a student's, or on the same machine once the probe reads higher, so a replay compares prompts
# without the word: the recorded answer stands, and the views keep this machine's word. The
# knowledge notes ranked by it (knowledge/ranking.py choose) say so in their reasons ("fusion
# (bottleneck: memory)", "cpu_vectorisation (general cpp advice)"): those reasons go too (the
# digest sorts lines, so the notes' order does not count).
BOUND_WORD = re.compile(r"\b(?:memory|compute|unknown)-bound\b")
NOTE_PICK = re.compile(r"^(- [a-z0-9_]+) \((.*)\)$", re.M)
BOUND_REASONS = ("bottleneck: ", "general ")


def without_bound(text: str) -> str:
    """`text` with the bound word as `~-bound` and the notes' reasons without the bottleneck
    (a note's ops and this machine's conditions stay)."""
    def kept_reasons(pick: re.Match) -> str:
        reasons = [r for r in pick.group(2).split("; ") if not r.startswith(BOUND_REASONS)]
        return f"{pick.group(1)} ({'; '.join(reasons)})"
    return NOTE_PICK.sub(kept_reasons, BOUND_WORD.sub("~-bound", text))


def without_standing(text: str) -> str:
    """`text` with the words a measurement decided replaced by `~` and the sentences it decided
    left out."""
    return without_bound(STANDING_WORDS.sub("~", STANDING_TEXT.sub("", text)))


def normalised(text: str) -> str:
    """Prompts quote measurements that differ run to run: decimals, and whole numbers with a
    unit (0.98x one run, 1x the next; 123 ms), and the machine's name and its description (the
    prompts' machine section, machine.SECTION), and what a measurement decides (which candidate
    was kept, whether it is memory- or compute-bound: without_standing). Sizes in the
    problem's source still count."""
    text = without_standing(MACHINE_SECTION.sub("<machine>", text))
    return MEASUREMENT.sub("#", DEVICE.sub("<device>", text))


def content_text(content) -> str:
    """A message's words. A picture (the profile's timeline, its roofline) is a picture of
    measurements, so only that it was there counts: a line `<image image/png>`, not its bytes."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return json.dumps(content, sort_keys=True)
    return "\n".join(block_text(b) for b in content)


def block_text(block: dict) -> str:
    if block.get("type") == "text":
        return block.get("text", "")
    if block.get("type") == "image":
        return f"<image {(block.get('source') or {}).get('media_type', '')}>"
    return json.dumps(block, sort_keys=True)


def has_images(messages: list[dict]) -> bool:
    return any(isinstance(m.get("content"), list) and
               any(b.get("type") == "image" for b in m["content"]) for m in messages)


def request_digest(system: str, messages: list[dict]) -> str:
    """A prompt's identity: its words, not its measurements, nor the order of lines that a
    measurement sorts (the top kernels by time share)."""
    parts = [system] + [f"{m.get('role')}\n" + content_text(m.get("content")) for m in messages]
    lines = sorted(line for part in parts for line in normalised(part).splitlines())
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


class Recorder:
    """Wraps a provider; appends each call to the recording file as it happens."""

    def __init__(self, inner, path: str | Path, role: str):
        self.inner, self.path, self.role = inner, Path(path), role
        self.name, self.model = inner.name, inner.model
        self.accepts_images = getattr(inner, "accepts_images", False)
        self.accepts_temperature = getattr(inner, "accepts_temperature", False)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    _lock = threading.Lock()
    _calls: dict[str, int] = {}

    def complete(self, system: str, messages: list[dict], max_tokens: int,
                 deadline: float | None = None, temperature: float | None = None) -> Reply:
        reply = self.inner.complete(system, messages, max_tokens, deadline=deadline,
                                    **sampling(temperature))
        with Recorder._lock:
            n = Recorder._calls.get(str(self.path), 0)
            Recorder._calls[str(self.path)] = n + 1
            with open(self.path, "a") as f:
                f.write(json.dumps({"call": n, "role": self.role, "digest":
                                    request_digest(system, messages),
                                    "request": {"system": system, "messages": messages,
                                                "max_tokens": max_tokens,
                                                **sampling(temperature)},
                                    "reply": asdict(reply)}) + "\n")
        return reply


class ReplayProvider:
    """Plays a recording back, call by call, per role (generation and analysis separately).

    A round's samples (and a search's branches) ask concurrently, so they reach a provider in
    any order: each request takes the earliest recorded call not yet played with the same
    prompt, and the run diverges only where no such call is left."""
    name = "replay"

    def __init__(self, path: str | Path, role: str, strict: bool = True, start: int = 0):
        path = Path(path)
        if not path.is_file():
            raise ProviderError(f"replay file {str(path)!r} does not exist")
        entries = read_recording(path)
        self.entries = [e for e in entries if e.get("role", role) == role]
        self.path, self.role, self.strict = path, role, strict
        self.position = start        # a resumed run picks up after the calls it already made
        self._unplayed = list(range(start, len(self.entries)))
        self._lock = threading.Lock()
        self.model = self.entries[0]["reply"].get("model", "") if self.entries else ""
        # pictures are sent where the recorded run sent them (a recording made before them,
        # or with --no-images, replays text only)
        self.accepts_images = any(has_images((e.get("request") or {}).get("messages") or [])
                                  for e in self.entries)
        self.accepts_temperature = any("temperature" in (e.get("request") or {})
                                       for e in self.entries)

    def complete(self, system: str, messages: list[dict], max_tokens: int,
                 deadline: float | None = None, temperature: float | None = None) -> Reply:
        # `deadline` is ignored: a recording answers at once, and never fails transiently;
        # `temperature` too: the recorded answer was drawn at the recorded one
        with self._lock:
            if not self._unplayed:
                raise ProviderError(f"replay {self.path.name} ran out: it holds "
                                    f"{len(self.entries)} {self.role} calls and call "
                                    f"{self.position + 1} was asked for")
            digest = request_digest(system, messages)
            index = next((k for k in self._unplayed
                          if recorded_digest(self.entries[k]) == digest), None)
            if index is None:
                entry = self.entries[self._unplayed[0]]
                if self.strict:
                    raise ProviderError(
                        f"replay {self.path.name} diverged at {self.role} call "
                        f"{self.position + 1}: the prompt differs from the recorded one "
                        f"({first_difference(entry.get('request'), system, messages)})")
                index = self._unplayed[0]
            self._unplayed.remove(index)
            self.position += 1
            return Reply(**self.entries[index]["reply"])


def recorded_digest(entry: dict) -> str:
    """The recorded prompt's identity, by today's rules where the prompt itself was kept (a
    recording made before a rule changed still replays), else the digest stored with it."""
    request = entry.get("request")
    if isinstance(request, dict) and "system" in request and "messages" in request:
        return request_digest(request["system"], request["messages"])
    return entry["digest"]


REPLY_FIELDS = {f.name for f in fields(Reply)}


def read_recording(path: Path) -> list[dict]:
    """The recorded calls, or a ProviderError naming the file and line that is damaged (a
    recording cut short by a crash, edited by hand, or not a recording at all)."""
    try:
        lines = path.read_text().splitlines()
    except UnicodeDecodeError:
        raise ProviderError(f"replay {path.name} is not a text file: not a kforge recording") \
            from None
    entries = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"replay {path.name} line {number}"
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as err:
            raise ProviderError(f"{where} is not valid JSON: {err.msg} at column {err.colno} "
                                "(a line cut short, or not a kforge recording); record the "
                                "session again") from None
        if not isinstance(entry, dict):
            raise ProviderError(f"{where} is not a recorded call (a JSON object)")
        missing = [key for key in ("reply", "digest") if key not in entry]
        if missing:
            raise ProviderError(f"{where} lacks {' and '.join(map(repr, missing))}: not a kforge "
                                "recording, or a damaged one")
        reply = entry["reply"]
        if not isinstance(reply, dict) or not isinstance(reply.get("text"), str) \
                or set(reply) - REPLY_FIELDS:
            raise ProviderError(f"{where} has a malformed reply: it needs a text and at most "
                                f"{', '.join(sorted(REPLY_FIELDS))}")
        entries.append(entry)
    return entries


def first_difference(recorded: dict | None, system: str, messages: list[dict]) -> str:
    if not isinstance(recorded, dict):
        return "the recording keeps no prompt to compare with"
    if normalised(recorded.get("system", "")) != normalised(system):
        return "system prompt"
    for i, (old, new) in enumerate(zip(recorded.get("messages", []), messages)):
        a = normalised(content_text(old.get("content", "")))
        b = normalised(content_text(new.get("content", "")))
        if a != b:
            at = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            return f"message {i}, character {at}: recorded {a[at:at + 40]!r}, now {b[at:at + 40]!r}"
    return f"{len(recorded.get('messages', []))} recorded messages, {len(messages)} now"
