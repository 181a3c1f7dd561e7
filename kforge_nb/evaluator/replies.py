"""What the candidate's worker may say, checked in the parent before any of it is used.

The worker runs the candidate's code, so its replies are hostile data: a forged reply can be any
JSON value. Each command has one reply shape; anything else (a missing key, a wrong type, a
state that is not a failure, a path that is not the one asked for, a timing sample that is not
a finite non-negative number) is a protocol violation, which the parent blames on the
candidate. The checks are about shape only: what a reply claims (an audit, a timing) is still
weighed against what the parent and the judge see for themselves.
"""
from __future__ import annotations

import math

from ..result import COMPILE_FAILURE, RUNTIME_ERROR
from .wire import ProtocolError

FAILURE_STATES = (COMPILE_FAILURE, RUNTIME_ERROR)


def number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value)


def need(condition: bool, what: str) -> None:
    if not condition:
        raise ProtocolError(what)


def strings(value, what: str) -> None:
    need(isinstance(value, list) and all(isinstance(v, str) for v in value),
         f"{what} is not a list of strings")


def failure(failed) -> None:
    need(isinstance(failed, dict), "`failed` is not an object")
    need(failed.get("state") in FAILURE_STATES,
         f"`failed` claims the state {str(failed.get('state'))[:40]!r}")
    for key in ("type", "text", "phase"):
        need(isinstance(failed.get(key, ""), str), f"`failed.{key}` is not a string")
    need(failed.get("line") is None or (isinstance(failed["line"], int) and
                                        not isinstance(failed["line"], bool)),
         "`failed.line` is not a line number")


def audit(seen) -> None:
    need(isinstance(seen, dict), "`audit` is not an object")
    compute, launches = seen.get("compute"), seen.get("launches")
    need(isinstance(compute, list) and all(
        isinstance(c, dict) and isinstance(c.get("op"), str) and isinstance(c.get("where"), str)
        and isinstance(c.get("calls", 1), int) for c in compute), "`audit.compute` is malformed")
    need(isinstance(launches, dict) and all(isinstance(k, str) and isinstance(v, int)
                                            for k, v in launches.items()),
         "`audit.launches` is malformed")
    strings(seen.get("unaudited", []), "`audit.unaudited`")


def output(reply: dict, path: str) -> None:
    """A trial's or a kept call's output: the file asked for, or why there is none."""
    audit(reply.get("audit"))
    if "odd_output" in reply:
        need(isinstance(reply["odd_output"], str), "`odd_output` is not a string")
        return
    need(reply.get("written") == path, "the output was not written where it was asked for")


def fingerprints(value) -> None:
    need(isinstance(value, list) and all(
        v is None or (isinstance(v, list) and len(v) == 2 and all(isinstance(n, int) for n in v))
        for v in value), "`inputs_after` is malformed")


def checked(command: tuple, reply: dict) -> dict:
    """`reply` if it has the shape `command`'s reply must have; else ProtocolError."""
    strings(reply.get("tampered", []), "`tampered`")
    if "failed" in reply:
        failure(reply["failed"])
        return reply
    name, args = command[0], command[1:]
    if name == "built":
        need(reply.get("built") is True, "the candidate's build was not reported")
    elif name == "construct":
        need(reply.get("constructed") is True and isinstance(reply.get("weights"), str),
             "the reply to `construct` is malformed")
        strings(reply.get("unaudited", []), "`unaudited`")
    elif name == "trial":
        output(reply, args[2])
        if "written" in reply:
            fingerprints(reply.get("inputs_after"))
    elif name == "kept_output":
        output(reply, args[1])
    elif name == "prepare_timing":
        need(isinstance(reply.get("sets"), int), "the reply to `prepare_timing` is malformed")
        strings(reply.get("unaudited", []), "`unaudited`")
    elif name == "time":
        samples, kept = reply.get("samples"), reply.get("kept")
        need(isinstance(samples, list) and len(samples) == args[0] and
             all(number(s) and s >= 0 for s in samples),
             f"`samples` is not {args[0]} finite non-negative times")
        need(reply.get("wall_ms") is None or (number(reply["wall_ms"]) and reply["wall_ms"] >= 0),
             "`wall_ms` is not a time")
        keep = args[1] if len(args) > 1 else []
        need(isinstance(kept, list) and len(kept) == len(keep) and
             all(isinstance(k, int) for k in kept) and
             len({k - i for k, i in zip(kept, keep)}) <= 1,
             "`kept` is not the calls asked to be kept")
        strings(reply.get("unaudited", []), "`unaudited`")
    elif name == "profile":
        events = reply.get("events")
        need(isinstance(events, list) and all(
            isinstance(e, dict) and isinstance(e.get("name"), str) and number(e.get("start_us"))
            and number(e.get("duration_us")) for e in events), "`events` is malformed")
        calls_ms = reply.get("calls_ms", [])
        need(isinstance(calls_ms, list) and len(calls_ms) <= 64 and
             all(number(ms) and ms >= 0 for ms in calls_ms), "`calls_ms` is not times")
        need(reply.get("picked") is None or (isinstance(reply["picked"], int) and
                                             not isinstance(reply["picked"], bool)),
             "`picked` is not a call's index")
        strings(reply.get("unaudited", []), "`unaudited`")
    elif name == "nsight":
        need(isinstance(reply.get("ncu_csv", ""), str) and
             isinstance(reply.get("ncu_error", ""), str), "the nsight reply is malformed")
    elif name == "measure_hook":
        values = reply.get("values", {})
        need(isinstance(values, dict) and all(isinstance(k, str) and number(v)
                                              for k, v in values.items()),
             "`values` is not names and numbers")
        strings(reply.get("errors", []), "`errors`")
    return reply
