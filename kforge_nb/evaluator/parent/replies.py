"""What the candidate's worker may say, checked in the parent before any of it is used.

The worker runs the candidate's code, so its replies are hostile data: a forged reply can be any
JSON value a frame holds (wire/framing.py bounds a frame's size, nesting and values). Each
command has one reply shape (SHAPES), and `checked` hands on a copy that holds only what that
shape names, each of the type and within the bounds it must have. Anything else (a missing
key, a wrong type, a text longer than any honest reply's, a count that is negative or absurd, a
name with a line break or a terminal's control character, a state that is not a failure, a
step the protocol does not have, a path that is not the one asked for, a time that is not a finite
non-negative number) is a protocol violation, which the parent blames on the candidate; no
other part of a reply reaches a verdict, a message or a file. The checks are about shape only:
what a reply claims (an audit, a timing) is still weighed against what the parent and the
judge see for themselves.
"""
from __future__ import annotations

import math
import re

from ...result import COMPILE_FAILURE, RUNTIME_ERROR
from ..wire.messages import reply_shape
from .verdicts import CONTROL
from ..wire.framing import ProtocolError

FAILURE_STATES = (COMPILE_FAILURE, RUNTIME_ERROR)
EXCEPTION_NAME = re.compile(r"[^\W\d][\w.]{0,199}")
# Bounds no honest reply comes near: the worker cuts an exception's text to 4,000 characters,
# its traceback to 6,000, a compiler's log to 8,000, ncu's CSV to 200,000, and sends 2,000
# profile events at most.
LONG_TEXT = 1 << 16
CSV_TEXT = 1 << 20
NAME = 4096            # one line: an op, a torch function, a kernel (C++ templates: long)
ITEMS = 4096           # entries of a list or an object
BELOW_CALLS = 1 << 31  # a line number, a timed call's number, a count of calls
BELOW_FINGERPRINT = 1 << 63


def need(condition: bool, what: str) -> None:
    if not condition:
        raise ProtocolError(what)


def refuse(value, what: str, expected: str):
    """The protocol violation of a value that is not what was `expected` (messages are made
    only here: the checks of an honest reply format nothing)."""
    raise ProtocolError(f"{what} is missing" if value is None else f"{what} is not {expected}")


def number(value) -> bool:
    """A finite JSON number (an integer too large for a float is not one: math.isfinite would
    raise on it)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) < 1 << 53


def time_ms(value, what: str) -> float:
    if not (number(value) and value >= 0):
        refuse(value, what, "a finite non-negative time")
    return value


def count(value, what: str, below: int = BELOW_CALLS) -> int:
    if not (isinstance(value, int) and not isinstance(value, bool) and 0 <= value < below):
        refuse(value, what, f"a whole number from 0 to {below - 1}")
    return value


def text(value, what: str, limit: int = LONG_TEXT) -> str:
    if not (isinstance(value, str) and len(value) <= limit):
        refuse(value, what, f"a text of at most {limit} characters")
    return value


def name(value, what: str) -> str:
    """One line of at most NAME characters, without a control character: it is said inside
    the evaluator's own sentences."""
    if not (isinstance(value, str) and len(value) <= NAME and "\n" not in value and
            not CONTROL.search(value)):
        refuse(value, what, "a one-line name")
    return value


def listed(value, what: str) -> list:
    if not (isinstance(value, list) and len(value) <= ITEMS):
        refuse(value, what, f"a list of at most {ITEMS} entries")
    return value


def names(value, what: str) -> list[str]:
    return [name(v, "an entry of " + what) for v in listed(value, what)]


def shown(value) -> str:
    """A hostile value in a protocol violation's message: a short repr of a text, else its
    type (never the whole of a large or deep value)."""
    return repr(value[:40]) if isinstance(value, str) else type(value).__name__


# --- the parts of replies ------------------------------------------------------------------------

def failure(failed) -> dict:
    """A failure the worker reports: the exception (or the compiler's error), and the step."""
    need(isinstance(failed, dict), "`failed` is not an object")
    if failed.get("state") not in FAILURE_STATES:
        raise ProtocolError(f"`failed` claims the state {shown(failed.get('state'))}")
    step = PHASE.match(text(failed.get("phase"), "`failed.phase`"))
    need(step is not None, "`failed.phase` is not a step of the protocol")
    kind = text(failed.get("type"), "`failed.type`", NAME)
    need(EXCEPTION_NAME.fullmatch(kind) is not None, "`failed.type` is not an exception's name")
    said = {"state": failed["state"], "phase": step.group(0), "type": kind,
            "text": text(failed.get("text"), "`failed.text`")}
    for key in ("traceback", "log", "source_line"):
        if key in failed:
            said[key] = text(failed[key], f"`failed.{key}`")
    for key in ("line", "native_line"):
        if failed.get(key) is not None:
            said[key] = count(failed[key], f"`failed.{key}`")
    if "kind" in failed:
        said["kind"] = name(failed["kind"], "`failed.kind`")
    return said


def audit(seen) -> dict:
    """What the audit saw a trial's forward compute with torch, and the kernels it launched."""
    need(isinstance(seen, dict), "`audit` is not an object")
    ops = listed(seen.get("compute"), "`audit.compute`")
    need(all(isinstance(op, dict) for op in ops), "`audit.compute` is malformed")
    launches = seen.get("launches")
    need(isinstance(launches, dict) and len(launches) <= ITEMS, "`audit.launches` is malformed")
    return {"compute": [{"op": name(op.get("op"), "an op of `audit.compute`"),
                         "where": name(op.get("where"), "a place in `audit.compute`"),
                         "calls": count(op.get("calls", 1), "an op's calls"),
                         "host": flag(op.get("host", False), "an op's `host`")} for op in ops],
            "launches": {name(kind, "a launch's kind"): count(n, "a count of launches")
                         for kind, n in launches.items()}}


def flag(value, what: str) -> bool:
    if not isinstance(value, bool):
        refuse(value, what, "true or false")
    return value


def output(reply: dict, path: str) -> dict:
    """A trial's or a kept call's output: the file asked for, or why there is none."""
    said = {"audit": audit(reply.get("audit"))}
    if "odd_output" in reply:
        said["odd_output"] = name(reply["odd_output"], "`odd_output`")
        return said
    need(reply.get("written") == path, "the output was not written where it was asked for")
    said["written"] = path
    return said


def fingerprints(value) -> list:
    """The inputs as the candidate left them: two 63-bit numbers each (None: not a tensor)."""
    need(all(v is None or (isinstance(v, list) and len(v) == 2)
             for v in listed(value, "`inputs_after`")), "`inputs_after` is malformed")
    return [v if v is None else [count(n, "a fingerprint", BELOW_FINGERPRINT) for n in v]
            for v in value]


def event(e) -> dict:
    need(isinstance(e, dict), "an entry of `events` is not an object")
    said = {"name": name(e.get("name"), "an event's name"),
            "start_us": time_ms(e.get("start_us"), "an event's start"),
            "duration_us": time_ms(e.get("duration_us"), "an event's duration")}
    if "category" in e:
        said["category"] = name(e["category"], "an event's category")
    stream = e.get("stream")
    if stream is not None:
        said["stream"] = stream if number(stream) else name(stream, "an event's stream")
    return said


# --- the reply to each command: command's arguments -> the reply's checked copy -----------------

def built(reply: dict, args: tuple) -> dict:
    need(reply.get("built") is True, "the candidate's build was not reported")
    return {"built": True}


def constructed(reply: dict, args: tuple) -> dict:
    need(reply.get("constructed") is True, "the reply to `construct` is malformed")
    return {"constructed": True, "weights": name(reply.get("weights"), "`weights`"),
            "construction": names(reply.get("construction", []), "`construction`")}


def output_and_inputs(reply: dict, path: str) -> dict:
    """A call's output (output) and, where it was written, its inputs as the call left them."""
    said = output(reply, path)
    if "written" in said:
        said["inputs_after"] = fingerprints(reply.get("inputs_after"))
    return said


def trial(reply: dict, args: tuple) -> dict:
    return output_and_inputs(reply, args[2])


def kept_output(reply: dict, args: tuple) -> dict:
    return output_and_inputs(reply, args[1])


def prepare_timing(reply: dict, args: tuple) -> dict:
    return {"sets": count(reply.get("sets"), "the reply to `prepare_timing`")}


def timed(reply: dict, args: tuple) -> dict:
    calls, keep = args[0], list(args[1]) if len(args) > 1 else []
    samples, kept, wall = reply.get("samples"), reply.get("kept"), reply.get("wall_ms")
    if not (isinstance(samples, list) and len(samples) == calls and
            all(number(s) and s >= 0 for s in samples)):
        refuse(samples, "`samples`", f"{calls} finite non-negative times")
    need(wall is None or (number(wall) and wall >= 0), "`wall_ms` is not a time")
    need(isinstance(kept, list) and len(kept) == len(keep), "`kept` is not the calls asked "
         "to be kept")
    kept = [count(k, "a kept call") for k in kept]
    need(len({k - i for k, i in zip(kept, keep)}) <= 1, "`kept` is not the calls asked to be "
         "kept")
    fastest = reply.get("fastest")
    if len(args) > 2 and args[2]:
        # the block's first call is known from `kept` (never empty where the fastest is asked)
        need(bool(kept) and fastest == kept[0] - keep[0] + samples.index(min(samples)),
             "`fastest` is not the block's fastest call")
    else:
        need(fastest is None, "`fastest` where none was asked for")
    return {"samples": samples, "wall_ms": wall, "kept": kept, "fastest": fastest}


def profiled(reply: dict, args: tuple) -> dict:
    calls_ms = reply.get("calls_ms", [])
    need(isinstance(calls_ms, list) and len(calls_ms) <= 64, "`calls_ms` is not times")
    picked = reply.get("picked")
    return {"events": [event(e) for e in listed(reply.get("events"), "`events`")],
            "calls_ms": [time_ms(ms, "an entry of `calls_ms`") for ms in calls_ms],
            "picked": None if picked is None else count(picked, "`picked`")}


def nsight(reply: dict, args: tuple) -> dict:
    said = {}
    if "ncu_csv" in reply:
        said["ncu_csv"] = text(reply["ncu_csv"], "`ncu_csv`", CSV_TEXT)
    if "ncu_error" in reply:
        said["ncu_error"] = text(reply["ncu_error"], "`ncu_error`")
    return said


def measure_hook(reply: dict, args: tuple) -> dict:
    values = reply.get("values", {})
    need(isinstance(values, dict) and len(values) <= ITEMS and all(
        number(v) for v in values.values()), "`values` is not names and numbers")
    return {"values": {name(k, "a measure's name"): v for k, v in values.items()},
            "errors": [text(e, "an entry of `errors`", NAME)
                       for e in listed(reply.get("errors", []), "`errors`")]}


SHAPES = {"built": built, "construct": constructed, "trial": trial, "kept_output": kept_output,
          "prepare_timing": prepare_timing, "time": timed, "profile": profiled,
          "nsight": nsight, "measure_hook": measure_hook}
# the steps a failure may name: the worker's build, then a command (and its first argument, where
# that is a number: `trial 0`, `time 50`), never the rest of what the worker wrote there
PHASE = re.compile(f"(build|{'|'.join(SHAPES)})( \\d{{1,9}})?(?=\\s|$)")


def checked(command: tuple, reply) -> dict:
    """The reply to `command`, reduced to what its shape names and checked; else
    ProtocolError. Every reply may say what the candidate replaced (`tampered`) and what torch
    computed unwatched (`unaudited`); a failure replaces the rest."""
    if not isinstance(reply, dict):
        raise ProtocolError(f"the reply is a {shown(reply)}, not an object")
    said = {"tampered": names(reply.get("tampered", []), "`tampered`")}
    if "failed" in reply:
        return {**said, "failed": failure(reply["failed"])}
    said["unaudited"] = names(reply.get("unaudited", []), "`unaudited`")
    return {**said, **SHAPES[reply_shape(command[0])](reply, command[1:])}
