"""Round four of the trust boundary, the protocol (issue 37, item 1): every malformed input from
the candidate's side is the candidate's verdict, never an exception out of evaluate() and never
"the reference itself failed".

The candidate's worker can write anything onto its connection to the parent and into the files
the judge reads. EXPLOITS are real candidates that do (tests/adversarial/candidates/r4p_*.py,
each one's docstring says what it sends and what the evaluator did with it before), judged by
the real evaluator, and three of them through `kforge eval` in a subprocess. Each ends as the
candidate's `runtime_error` whose message is the evaluator's own words: the candidate's output
or exception text only ever quoted, behind verdicts.QUOTE. Then each part on hostile bytes of
its own: wire's frames, replies' shapes (a seeded fuzz of every field of every reply included),
transfer's headers, verdicts' quoting.
"""
from __future__ import annotations

import json
import math
import os
import random
import re
import socket
import struct
import subprocess
import sys
import threading

import pytest
import torch

from kforge_nb.evaluator.parent import replies
from kforge_nb.evaluator.wire import framing, transfer
from kforge_nb.evaluator.parent.process import WorkerFailure
from kforge_nb.evaluator.parent.verdicts import (CONTROL, QUOTE, failure_result, printable, quoted,
                                          runtime_failure)
from kforge_nb.evaluator.wire.framing import ProtocolError
from kforge_nb.result import RUNTIME_ERROR
from kforge_nb.targets import get_target
from tests.adversarial.support import REPO, line_of, problem_file, source
from tests.adversarial.test_exploits import Case, judge_case  # noqa: F401,F811  (a fixture)

POSED = "the reference itself failed"      # what a candidate would have the evaluator say


def construct_line(candidate: str) -> int:
    return line_of(source(candidate), "raise RuntimeError(")


EXPLOITS = {
    # --- frames on the worker's connection -------------------------------------------------------
    "a frame of 5,000 `[` (json recurses past its limit)": Case(
        "relu", "r4p_deep_frame", RUNTIME_ERROR,
        says=["protocol violation: a frame nested deeper than 32 levels"]),
    "a frame that says it is 4 GiB long": Case(
        "relu", "r4p_frame_of_4gib", RUNTIME_ERROR,
        says=["protocol violation: a frame of 4294967295 bytes (at most"]),
    "a frame cut off, then the worker exits": Case(
        "relu", "r4p_closes_mid_frame", RUNTIME_ERROR,
        says=["the worker process exited with code 3 before reporting"]),
    "a reply that is JSON but not an object": Case(
        "relu", "r4p_reply_not_an_object", RUNTIME_ERROR,
        says=["protocol violation: a reply that is not a JSON object (int)"]),
    "descriptors passed with a forged frame": Case(
        "relu", "r4p_passes_descriptors", RUNTIME_ERROR,
        says=["protocol violation in the reply to `construct`: `failed` claims the state "
              "'correct'"]),
    "the reading side of its connection shut down (the parent's send meets EPIPE)": Case(
        "relu", "r4p_shuts_its_reading_side", RUNTIME_ERROR,
        says=["the worker process exited with code 1 before reporting",
              QUOTE + "EOFError: the worker closed its connection"]),
    # --- replies out of shape --------------------------------------------------------------------
    "a forged failure without its type or step": Case(
        "relu", "r4p_failure_without_type", RUNTIME_ERROR,
        says=["protocol violation in the reply to `construct`: `failed.phase` is missing"]),
    "a forged `construct` reply whose construction is 7": Case(
        "relu", "r4p_construction_not_a_list", RUNTIME_ERROR,
        says=["protocol violation in the reply to `construct`: `construction` is not a list"]),
    "a forged trial reply: NaN launches, fingerprints -1 and 10**400": Case(
        "relu", "r4p_forged_numbers", RUNTIME_ERROR,
        says=["protocol violation in the reply to `trial`: a count of launches is not a whole "
              "number"]),
    "a forged failure whose exception name is a kforge sentence": Case(
        "relu", "r4p_forged_exception_name", RUNTIME_ERROR,
        says=["protocol violation in the reply to `construct`: `failed.type` is not an "
              "exception's name"]),
    # --- files the judge reads -------------------------------------------------------------------
    "each trial's file swapped for one whose header is 5,000 `[`": Case(
        "relu", "r4p_swaps_trial_header", RUNTIME_ERROR,
        says_re=r"^protocol violation: the output of trial \d+ is not what the harness writes: "
                r"its header is not JSON$"),
    # --- the candidate's words posing as the evaluator's -----------------------------------------
    "a printed `kforge: ... the reference itself failed` line, then exit 1": Case(
        "relu", "r4p_fake_kforge_line", RUNTIME_ERROR,
        says=["the worker process exited with code 1 before reporting (see worker.log); the end "
              "of its output:\n", f"{QUOTE}\\x1b[2K\n{QUOTE}kforge: relu: {POSED}"]),
    "an exception whose second line is a kforge sentence": Case(
        "relu", "r4p_exception_says_kforge", RUNTIME_ERROR,
        says=[f"RuntimeError during construct, line {construct_line('r4p_exception_says_kforge')}"
              f":\n{QUOTE}the kernel's tables could not be set up\n{QUOTE}kforge: relu: {POSED}"]),
}


def own_words(message: str) -> list[str]:
    """The lines of a verdict's message that are the evaluator's (not quoted)."""
    return [line for line in message.split("\n") if not line.startswith(QUOTE)]


def assert_the_evaluators_words(message: str) -> None:
    assert CONTROL.search(message) is None, repr(message)     # escapes, not sequences
    assert not any(POSED in line for line in own_words(message)), message


@pytest.mark.parametrize("name", list(EXPLOITS))
def test_malformed_input_is_the_candidates_runtime_error(name, judge_case):  # noqa: F811
    case = EXPLOITS[name]
    result = judge_case(case)           # it returns: nothing raised out of evaluate()
    assert result.state == case.state, result.message
    assert result.rules == case.rules, result.message
    for fragment in case.says:
        assert fragment in result.message, result.message
    if case.says_re:
        assert re.search(case.says_re, result.message), result.message
    assert_the_evaluators_words(result.message)


def test_descriptors_passed_with_a_frame_are_never_installed_in_the_parent(judge_case):  # noqa: F811
    result = judge_case(EXPLOITS["descriptors passed with a forged frame"])
    assert result.state == RUNTIME_ERROR, result.message
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            held.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
    assert not [path for path in held if path.endswith("r4p-passed-fd")], held


# --- through the CLI: an exit status and a verdict, never a traceback ----------------------------

def kforge_eval(candidate: str, tmp_path, *args: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "kforge_nb.cli", "eval", str(problem_file("relu")),
               str(REPO / "tests" / "adversarial" / "candidates" / f"{candidate}.py"),
               "--target", "cpp", "--out", str(tmp_path / "runs"), "--no-compile-baseline",
               *args]
    return subprocess.run(command, cwd=tmp_path, env={**os.environ, "PYTHONPATH": path},
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("name", ["a frame of 5,000 `[` (json recurses past its limit)",
                                  "each trial's file swapped for one whose header is 5,000 `[`"])
def test_kforge_eval_gives_the_verdict_and_exits_1(name, tmp_path):
    done = kforge_eval(EXPLOITS[name].candidate, tmp_path, "--json")
    assert "Traceback" not in done.stderr and POSED not in done.stderr, done.stderr
    assert done.returncode == 1, done.stderr          # EXIT_VERDICT, not EXIT_USAGE (2)
    verdict = json.loads(done.stdout)
    assert verdict["state"] == RUNTIME_ERROR
    assert verdict["message"].startswith("protocol violation"), verdict["message"]


def test_kforge_eval_shows_a_printed_kforge_line_only_quoted(tmp_path):
    done = kforge_eval("r4p_fake_kforge_line", tmp_path)
    assert done.returncode == 1, done.stderr
    lines = (done.stdout + done.stderr).splitlines()
    assert lines[0].startswith("runtime_error: the worker process exited with code 1"), lines
    posing = [line for line in lines if POSED in line]
    assert posing and all(line.startswith(QUOTE) for line in posing), lines
    assert "\x1b" not in done.stdout and "\r" not in done.stdout


# --- wire: frames ------------------------------------------------------------------------------

def frames(payload: bytes) -> socket.socket:
    """Our end of a connection whose peer sends `payload` (from a thread: it may be larger
    than the socket's buffer) and closes."""
    ours, theirs = socket.socketpair()

    def send() -> None:
        with theirs:
            theirs.sendall(payload)
    threading.Thread(target=send, daemon=True).start()
    ours.settimeout(10)
    return ours


def frame(data: bytes) -> bytes:
    return struct.pack("!I", len(data)) + data


@pytest.mark.parametrize("depth", [framing.MAX_DEPTH + 1, 900, 5000])
def test_a_frame_nested_deeper_than_allowed_is_a_protocol_error(depth):
    # 900 parses in json but breaks what recurses over it next; 5,000 breaks json itself
    with pytest.raises(ProtocolError, match="nested deeper"):
        framing.recv(frames(frame(b"[" * depth + b"]" * depth)))
    with pytest.raises(ProtocolError, match="nested deeper"):
        framing.recv(frames(frame(b'{"a":' * depth + b"1" + b"}" * depth)))


def test_a_frame_nested_as_deep_as_allowed_is_read():
    depth = framing.MAX_DEPTH
    assert framing.recv(frames(frame(b"[" * depth + b"]" * depth))) is not None


def test_a_workers_frame_of_too_many_values_is_refused_before_it_is_parsed():
    # 3 MB of `{},`: a million objects (~70 MB) in the parent had it been parsed
    data = b"[" + b"{}," * framing.MAX_VALUES + b"{}]"
    with pytest.raises(ProtocolError, match="more than"):
        framing.Channel(frames(frame(data))).recv()


def test_a_frame_cut_off_is_the_end_of_the_stream_not_a_hang():
    with pytest.raises(EOFError, match="mid-frame"):
        framing.recv(frames(struct.pack("!I", 100) + b'{"construc'))


def test_descriptors_sent_with_a_frame_are_never_installed(tmp_path):
    marker = tmp_path / "passed"
    marker.write_text("the sender's")
    ours, theirs = socket.socketpair()
    with ours, theirs:
        fd = os.open(marker, os.O_RDONLY)
        socket.send_fds(theirs, [frame(b'{"built": true}')], [fd] * 16)
        os.close(fd)
        assert framing.Channel(ours).recv() == {"built": True}
        held = [os.readlink(f"/proc/self/fd/{n}") for n in os.listdir("/proc/self/fd")
                if os.path.exists(f"/proc/self/fd/{n}")]
    assert str(marker) not in held


def test_nan_crosses_the_wire_and_replies_refuse_it_where_a_number_is_read():
    # the judge may report NaN errors; from the candidate, NaN is never a time or a count
    assert math.isnan(framing.recv(frames(frame(b'{"max_abs_error": NaN}')))["max_abs_error"])
    with pytest.raises(ProtocolError):
        replies.checked(("time", 1, []), {"samples": [float("nan")], "wall_ms": None,
                                          "kept": []})


# --- replies: each shape, and nothing but it ----------------------------------------------------

PATH = "/run/exchange/trial0.bin"
AUDIT = {"compute": [], "launches": {"native": 1}}
FAILED = {"state": "runtime_error", "phase": "trial 0", "type": "IndexError", "text": "out"}
HONEST = {     # each command's name: the command, and a reply as the worker gives it
    "built": (("built",), {"built": True}),
    "construct": (("construct", "/w.pt"), {
        "constructed": True, "weights": "copied from the reference (parameter names match)",
        "tampered": [], "construction": [], "unaudited": []}),
    "trial": (("trial", 0, {"seed": 1}, PATH), {
        "written": PATH, "audit": {"compute": [{"op": "mm", "where": "line 12", "calls": 1,
                                                "host": False}], "launches": {"native": 1}},
        "inputs_after": [[5, 7], None], "tampered": [], "unaudited": []}),
    "kept_output": (("kept_output", 3, PATH), {
        "odd_output": "ModelNew.forward returned None", "audit": {"compute": [],
                                                                  "launches": {}}}),
    "prepare_timing": (("prepare_timing", [{"seed": 1}]), {"sets": 2, "tampered": [],
                                                            "unaudited": []}),
    "time": (("time", 3, [1]), {"samples": [0.5, 0.25, 0.75], "wall_ms": 2.0, "kept": [9],
                                "tampered": [], "unaudited": ["torch.relu"]}),
    "profile": (("profile", "/t.json"), {
        "events": [{"name": "cpu::relu", "start_us": 0.0, "duration_us": 3.5, "stream": 7,
                    "category": "cpu_op"}], "picked": 1, "calls_ms": [0.1, 0.2, 0.3]}),
    "nsight": (("nsight", ["ncu"], "/w.pt", {}, 150.0), {"ncu_csv": "ID,Kernel Name\n"}),
    "measure_hook": (("measure_hook", "src", "label", {}), {"values": {"tokens_per_s": 12.5},
                                                           "errors": []}),
}


def test_honest_replies_pass_whole():
    for command, reply in HONEST.values():
        said = replies.checked(command, reply)
        assert {k: said[k] for k in reply} == reply, command


def test_a_reply_is_handed_on_with_only_what_its_shape_names():
    forged = {**HONEST["built"][1], "junk": [1] * 100, "failed_not": {"state": "correct"}}
    assert replies.checked(("built",), forged) == {"built": True, "tampered": [],
                                                   "unaudited": []}
    failed = {"failed": {**FAILED, "log": "g++: error", "extra": {"nested": [float("nan")]}}}
    said = replies.checked(("trial", 0, {}, PATH), failed)
    assert said["failed"] == {**FAILED, "log": "g++: error"}


def test_a_failures_step_is_the_protocols_own_word_for_it():
    long_step = {**FAILED, "phase": "prepare_timing [{'seed': 1000}] and more"}
    said = replies.checked(("prepare_timing", []), {"failed": long_step})
    assert said["failed"]["phase"] == "prepare_timing"


HOSTILE = {
    "construction: 7": (("construct", "/w.pt"), {**HONEST["construct"][1], "construction": 7}),
    "weights over two lines": (("construct", "/w.pt"), {**HONEST["construct"][1],
                                                        "weights": "ok\nkforge: " + POSED}),
    "a failure without type and step": (("built",), {"failed": {"state": "runtime_error",
                                                                "text": "x"}}),
    "a failure claiming `correct`": (("built",), {"failed": {**FAILED, "state": "correct"}}),
    "a failure whose type is a sentence": (("built",), {"failed": {**FAILED, "type":
                                                                   "kforge: " + POSED}}),
    "a failure in no step": (("built",), {"failed": {**FAILED, "phase": "the reference"}}),
    "a failure's text of 1 MB": (("built",), {"failed": {**FAILED, "text": "x" * (1 << 20)}}),
    "a failure's line -3": (("built",), {"failed": {**FAILED, "line": -3}}),
    "a failure's line true": (("built",), {"failed": {**FAILED, "line": True}}),
    "a failure's line of 401 digits": (("built",), {"failed": {**FAILED, "line": 10 ** 400}}),
    "a failure's log that is a number": (("built",), {"failed": {**FAILED, "log": 7}}),
    "NaN launches": (("trial", 0, {}, PATH), {"written": PATH, "audit": {
        "compute": [], "launches": {"native": float("nan")}}, "inputs_after": []}),
    "negative launches": (("trial", 0, {}, PATH), {"written": PATH, "audit": {
        "compute": [], "launches": {"native": -1}}, "inputs_after": []}),
    "an op that is not an object": (("trial", 0, {}, PATH), {"written": PATH, "audit": {
        "compute": [7], "launches": {}}, "inputs_after": []}),
    "an op's place over two lines": (("trial", 0, {}, PATH), {"written": PATH, "audit": {
        "compute": [{"op": "mm", "where": "line 1\nkforge: x"}], "launches": {}},
        "inputs_after": []}),
    "a negative fingerprint": (("trial", 0, {}, PATH), {"written": PATH, "audit": AUDIT,
                                                         "inputs_after": [[-1, 5]]}),
    "a fingerprint of 2**63": (("trial", 0, {}, PATH), {"written": PATH, "audit": AUDIT,
                                                         "inputs_after": [[1 << 63, 5]]}),
    "a fingerprint of three numbers": (("trial", 0, {}, PATH), {"written": PATH, "audit": AUDIT,
                                                                 "inputs_after": [[1, 2, 3]]}),
    "an output written elsewhere": (("trial", 0, {}, PATH), {"written": "/etc/passwd",
                                                             "audit": AUDIT,
                                                             "inputs_after": []}),
    "an odd output with a terminal sequence": (("kept_output", 0, PATH), {
        "odd_output": "\x1b[2Kkforge: " + POSED, "audit": AUDIT}),
    "a time of 401 digits (too large for a float)": (("time", 1, []), {
        "samples": [10 ** 400], "wall_ms": None, "kept": []}),
    "a kept call of 2**31 (the judge would recompute its inputs)": (("time", 1, [0]), {
        "samples": [0.5], "wall_ms": None, "kept": [1 << 31]}),
    "a negative kept call": (("time", 1, [0]), {"samples": [0.5], "wall_ms": None,
                                                 "kept": [-1]}),
    "a negative event duration": (("profile", "/t.json"), {"events": [
        {"name": "k", "start_us": 0.0, "duration_us": -1.0}]}),
    "5,000 events": (("profile", "/t.json"), {"events": [
        {"name": "k", "start_us": 0.0, "duration_us": 1.0}] * 5000}),
    "a measure of 401 digits": (("measure_hook", "s", "l", {}), {"values": {"x": 10 ** 400}}),
    "`tampered` that is a number": (("built",), {"built": True, "tampered": 7}),
    "a tampered name over two lines": (("built",), {"built": True,
                                                    "tampered": ["a\nkforge: " + POSED]}),
    "a reply that is a list": (("built",), []),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_reply_is_a_protocol_error(name):
    command, reply = HOSTILE[name]
    with pytest.raises(ProtocolError):
        replies.checked(command, reply)


def hostile_value(rng: random.Random, depth: int = 0):
    """A JSON value of the kinds a forged reply can hold: every type, NaN and infinities,
    integers too large for a float, negative and enormous counts, control characters, lists
    and objects a few levels deep."""
    leaves = [None, True, False, 0, -1, 1 << 31, 1 << 63, 10 ** 400, float("nan"),
              float("inf"), -0.0, 1e308, "", "x\n\x1b[2K", "line x", "trial 0", "x" * 70000,
              "IndexError", "/run/exchange/trial0.bin"]
    roll = rng.random()
    if depth < 3 and roll < 0.2:
        return [hostile_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if depth < 3 and roll < 0.35:
        keys = ["state", "phase", "type", "text", "line", "op", "where", "name", "start_us",
                "duration_us", "compute", "launches", "x"]
        return {rng.choice(keys): hostile_value(rng, depth + 1) for _ in range(rng.randrange(4))}
    return rng.choice(leaves)


def replaced(value, rng: random.Random):
    """`value` (an honest reply) with one of its parts, at any depth, replaced by a hostile
    value."""
    if isinstance(value, dict) and value and rng.random() < 0.7:
        key = rng.choice(list(value))
        return {**value, key: replaced(value[key], rng)}
    if isinstance(value, list) and value and rng.random() < 0.7:
        k = rng.randrange(len(value))
        return value[:k] + [replaced(value[k], rng)] + value[k + 1:]
    return hostile_value(rng)


def test_no_reply_makes_the_checker_raise_anything_but_a_protocol_error():
    """4,000 honest replies with one part swapped for hostile data, seeded: each is handed on
    or refused as a protocol violation; never an exception of another kind, and what is
    handed on is within the bounds the parent relies on."""
    rng = random.Random(37)
    refused = 0
    honest = list(HONEST.values()) + [(command, {"failed": FAILED})
                                      for command, _ in HONEST.values()]
    for k in range(4000):
        command, reply = honest[k % len(honest)]
        try:
            said = replies.checked(command, replaced(reply, rng))
        except ProtocolError:
            refused += 1
            continue
        json.dumps(said, allow_nan=False)        # no NaN or infinity reaches a verdict's JSON
        assert framing.nesting(said) <= 5
    assert 1000 < refused < 4000     # most hostile replies are refused, some parts are ignored


# --- transfer: the judge reads a file the candidate wrote ---------------------------------------

@pytest.mark.parametrize("header, says", [
    (b"[" * 5000, "not JSON"),
    (b'[{"dtype": [[[]]], "shape": [1]}]', "entry 0 is not a dtype and a shape"),
    (b'[{"dtype": {"a": 1}, "shape": [1]}]', "entry 0 is not a dtype and a shape"),
    (b'[null, {"dtype": "torch.float32", "shape": [true]}]', "entry 1 is not a dtype"),
    (b'[{"dtype": "torch.float32", "shape": [-1]}]', "not a dtype and a shape"),
    (b'[{"dtype": "torch.float32", "shape": ' + json.dumps([1] * 17).encode() + b"}]",
     "not a dtype and a shape"),
    (b'[{"dtype": "torch.float32", "shape": [1e999]}]', "not a dtype and a shape"),
    (b"[7]", "entry 0 is not a dtype"),
    (b"\xff\xfe", "not JSON"),
])
def test_a_hostile_header_is_bad_output_never_another_exception(tmp_path, header, says):
    path = tmp_path / "trial0.bin"
    path.write_bytes(header + b"\n" + bytes(16))
    with pytest.raises(transfer.BadOutput, match=says):
        transfer.read_tensors(str(path), "cpu")


def test_the_judge_reads_a_hostile_file_as_bad_output_and_removes_it(tmp_path):
    from kforge_nb.evaluator.worker import correctness
    from kforge_nb.evaluator.worker.judge import candidates_outputs
    from kforge_nb.result import Correctness
    path = tmp_path / "call0.bin"
    path.write_bytes(b"[" * 5000 + b"\n")
    reference = [torch.zeros(4)]
    with pytest.raises(transfer.BadOutput, match="not JSON"):
        candidates_outputs(str(path), reference, lambda data: correctness.compare_outputs(
            reference, data, "strict", Correctness()))
    assert not path.exists()


# --- verdicts: the candidate's words quoted -----------------------------------------------------

def test_control_characters_are_shown_as_escapes():
    assert printable("a\x1b[2Kb\rc\u202ed\te") == "a\\x1b[2Kb\\rc\\u202ed\te"


def test_every_line_of_a_quote_is_behind_the_mark():
    block = quoted("first\n\nkforge: relu: " + POSED + "\r\nlast", 1000)
    assert block.split("\n") == [QUOTE + "first", QUOTE, QUOTE + "kforge: relu: " + POSED,
                                 QUOTE + "last"]
    assert quoted("x" * 100 + "END", 10, end=True) == QUOTE + "xxxxxxxEND"


def test_a_crash_verdict_quotes_the_end_of_the_workers_output():
    tail = "computing\n\x1b[1A\x1b[2Kkforge: relu: " + POSED
    result = runtime_failure(WorkerFailure("exit", "the worker process exited with code 1 "
                                           "before reporting", tail))
    assert result.message.split("\n")[0].endswith("; the end of its output:")
    assert result.message.split("\n")[2] == QUOTE + "\\x1b[1A\\x1b[2Kkforge: relu: " + POSED
    assert_the_evaluators_words(result.message)
    assert result.error["log_tail"] == tail          # kept as it was, for worker.log's reader


def test_a_reported_exception_of_one_line_stays_inline_and_of_several_is_quoted():
    cpp = get_target("cpp")
    one = failure_result({"failed": {**FAILED, "line": 12}}, cpp)
    assert one.message == "IndexError during trial 0, line 12: out"
    several = failure_result({"failed": {**FAILED, "text": "out\nkforge: " + POSED}}, cpp)
    assert several.message == f"IndexError during trial 0:\n{QUOTE}out\n{QUOTE}kforge: {POSED}"
    big = failure_result({"failed": {**FAILED, "text": "not enough memory: you tried to "
                                     "allocate 2147483648 bytes\nat alloc_cpu.cpp:124"}}, cpp)
    assert big.message.startswith("IndexError during trial 0 (2.0 GiB in one allocation):\n")
