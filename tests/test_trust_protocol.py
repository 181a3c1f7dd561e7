"""The parent's side of the trust boundary, piece by piece: frames that are data (never pickle),
replies checked for shape, output files checked before anything is allocated, the parent's
clock against the worker's, integrity of kforge's own worker code, Triton's exemption by code
identity, and torch calls seen only outside the trials. The whole-evaluator attacks are in
tests/adversarial/test_trust_boundary.py."""
from __future__ import annotations

import json
import os
import pickle
import socket
import struct
import types

import pytest
import torch

from kforge_nb.evaluator.parent import clocks, replies
from kforge_nb.evaluator.wire import framing, transfer
from kforge_nb.evaluator.worker import audit, integrity
from kforge_nb.evaluator.wire.framing import ProtocolError


# --- frames ----------------------------------------------------------------------------------

def frames(payload: bytes) -> socket.socket:
    ours, theirs = socket.socketpair()
    theirs.sendall(payload)
    theirs.close()
    ours.settimeout(5)
    return ours


class Boom:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_a_pickle_frame_is_a_protocol_error_not_code_run():
    data = pickle.dumps({"ok": Boom()})
    with pytest.raises(ProtocolError, match="not JSON"):
        framing.recv(frames(struct.pack("!I", len(data)) + data))


def test_an_oversized_frame_is_refused_before_it_is_read():
    with pytest.raises(ProtocolError, match="at most"):
        framing.recv(frames(struct.pack("!I", framing.MAX_FRAME + 1)))


def test_json_frames_round_trip_and_numbers_from_torch_become_numbers():
    ours, theirs = socket.socketpair()
    with ours, theirs:
        framing.send(theirs, {"samples": [torch.tensor(1.5).item(), 2], "t": (1, 2)})
        assert framing.recv(ours) == {"samples": [1.5, 2], "t": [1, 2]}


# --- replies ---------------------------------------------------------------------------------

AUDIT = {"compute": [], "launches": {"native": 1}}


def test_a_forged_failure_cannot_claim_the_correct_state():
    with pytest.raises(ProtocolError, match="claims the state"):
        replies.checked(("trial", 0, {}, "/x"), {"failed": {"state": "correct", "text": ""}})


def test_a_trial_reply_must_name_the_file_it_was_asked_for():
    good = {"written": "/run/exchange/trial0.bin", "audit": AUDIT, "inputs_after": [[1, 2]]}
    said = replies.checked(("trial", 0, {}, "/run/exchange/trial0.bin"), good)
    assert {k: said[k] for k in good} == good
    with pytest.raises(ProtocolError, match="where it was asked"):
        replies.checked(("trial", 0, {}, "/run/exchange/trial0.bin"),
                        {**good, "written": "/etc/passwd"})


@pytest.mark.parametrize("samples", [[0.1], [0.1, -1.0], [0.1, float("nan")], "fast"])
def test_timing_samples_must_be_the_calls_asked_for_as_finite_times(samples):
    with pytest.raises(ProtocolError):
        replies.checked(("time", 2, []), {"samples": samples, "wall_ms": None, "kept": []})


def test_the_kept_calls_must_be_the_ones_asked_to_be_kept():
    ok = {"samples": [0.1, 0.2, 0.3], "wall_ms": None, "kept": [12]}
    assert replies.checked(("time", 3, [2]), ok)
    with pytest.raises(ProtocolError, match="asked to be kept"):
        replies.checked(("time", 3, [2]), {**ok, "kept": []})


# --- output files ----------------------------------------------------------------------------

def test_an_honest_output_file_round_trips(tmp_path):
    path = str(tmp_path / "out.bin")
    x = torch.randn(3, 5)
    transfer.write_tensors(path, [x, None])
    y, none = transfer.read_tensors(path, "cpu")
    assert none is None and torch.equal(x, y)


@pytest.mark.parametrize("header, body, says", [
    (b"not json\n", b"", "not JSON"),
    (b'{"a": 1}\n', b"", "not a list"),
    (b'[{"dtype": "torch.float32", "shape": [1099511627775, 1024]}]\n', b"\0" * 8, "announces"),
    (b'[{"dtype": "os.system", "shape": [1]}]\n', b"\0" * 4, "not a dtype"),
    (b'[{"dtype": "torch.float32", "shape": [4]}]\n', b"\0" * 8, "announces 16 bytes"),
])
def test_a_forged_output_header_is_bad_output_and_nothing_is_allocated(tmp_path, header, body,
                                                                       says):
    path = tmp_path / "out.bin"
    path.write_bytes(header + body)
    with pytest.raises(transfer.BadOutput, match=says):
        transfer.read_tensors(str(path), "cpu")


def test_an_output_that_is_a_link_or_a_fifo_is_not_followed(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text(json.dumps([]) + "\n")
    link = tmp_path / "link.bin"
    link.symlink_to(secret)
    with pytest.raises(transfer.BadOutput, match="cannot be read"):
        transfer.read_tensors(str(link), "cpu")
    fifo = tmp_path / "fifo.bin"
    os.mkfifo(fifo)
    with pytest.raises(transfer.BadOutput, match="not a regular file"):
        transfer.read_tensors(str(fifo), "cpu")      # returns at once: no writer to wait for


# --- the parent's clock ----------------------------------------------------------------------

def rounds(judge_ms, judge_wall, cand_ms, cand_wall, n=10, k=7):
    return [(clocks.Block([judge_ms] * n, judge_wall), clocks.Block([cand_ms] * n, cand_wall))
            for _ in range(k)]


def test_a_worker_clock_that_says_1us_for_10ms_calls_is_caught():
    # the judge: 1 ms calls, 0.2 ms overhead a call; the candidate says 1 us, took 10 ms a call
    said = clocks.disagreement(rounds(1.0, 12.0, 0.001, 102.0))
    assert "0.001 ms a call" in said and "in all 7 rounds" in said


def test_an_honest_worker_under_load_is_believed():
    # every block of the candidate's lost 30 ms to other work: 3 ms a call unexplained, but
    # its calls are 2 ms, not 5x less than what the parent saw
    assert clocks.disagreement(rounds(1.0, 12.0, 2.0, 52.0)) == ""
    # one calm round is enough to believe it
    lying = rounds(1.0, 12.0, 0.001, 102.0)
    lying[3] = (lying[3][0], clocks.Block([0.001] * 10, 2.0))
    assert clocks.disagreement(lying) == ""


def test_one_or_two_rounds_never_accuse():
    """The Triton interpreter times one round of two calls: one block that lost time to a
    loaded machine is not a lie, however far apart the clocks."""
    assert clocks.disagreement(rounds(1.0, 12.0, 0.001, 102.0, k=2)) == ""
    assert clocks.disagreement(rounds(1.0, 12.0, 0.001, 102.0, k=clocks.ROUNDS_TO_ACCUSE))


def test_on_a_gpu_the_wall_clock_pass_is_counted_twice():
    # timed pass + wall pass: 2 x 10 x 1 ms plus overhead on both sides: believed
    assert clocks.disagreement(rounds(1.0, 22.0, 1.0, 22.0), passes=2) == ""


# --- integrity of kforge's own code ----------------------------------------------------------

def test_rebinding_the_harness_timer_or_swapping_a_functions_code_is_tampering():
    from kforge_nb.evaluator.worker import harness
    before = integrity.snapshot()
    original, code = harness.perf_counter_ns, transfer.write_tensors.__code__
    try:
        harness.perf_counter_ns = lambda: 0
        transfer.write_tensors.__code__ = (lambda path, tensors: None).__code__
        changed = integrity.changed(before)
    finally:
        harness.perf_counter_ns = original
        transfer.write_tensors.__code__ = code
    assert "kforge_nb.evaluator.worker.harness.perf_counter_ns" in changed
    assert "kforge_nb.evaluator.wire.transfer.write_tensors" in changed
    assert integrity.changed(before) == []


def test_a_method_replaced_on_a_worker_class_is_tampering():
    from kforge_nb.evaluator.worker import candidate
    before = integrity.snapshot()
    original = candidate.Candidate.time
    try:
        candidate.Candidate.time = lambda self, calls, keep: {}
        assert "kforge_nb.evaluator.worker.candidate.Candidate.time" in integrity.changed(before)
    finally:
        candidate.Candidate.time = original


def worker_modules(beside: set[str]) -> set[str]:
    """The evaluator's modules a worker runs, by their names under kforge_nb.evaluator:
    worker/entry.py and worker/nsight.py (the fork server's and the Nsight child's entry
    points) and every evaluator module they import, read from the source (the imports inside
    functions too); those `beside` are not followed."""
    import ast
    from pathlib import Path
    evaluator = Path(integrity.__file__).parent.parent

    def module(name: str) -> Path:
        return evaluator / (name.replace(".", "/") + ".py")

    seen, todo = set(), ["worker.entry", "worker.nsight"]
    while todo:
        name = todo.pop()
        if name in seen or name in beside:
            continue
        seen.add(name)
        package = name.split(".")[:-1]
        for node in ast.walk(ast.parse(module(name).read_text())):
            if not isinstance(node, ast.ImportFrom) or not node.level or \
                    node.level > len(package) + 1:      # outside the evaluator: not its own
                continue
            base = package[:len(package) - node.level + 1] + \
                (node.module.split(".") if node.module else [])
            names = [".".join(base)] + [".".join(base + [a.name]) for a in node.names]
            todo += [n for n in names if n and module(n).exists()]
    return seen


def test_every_module_a_worker_runs_is_under_the_integrity_check():
    # process.py: the parent's worker handle, of which the judge reads available_memory()
    # (never guarded, and the parent's modules it imports are not the workers')
    unguarded = worker_modules(beside={"parent.process"}) - set(integrity.OWN_MODULES)
    assert not unguarded, f"worker modules outside integrity.OWN_MODULES: {sorted(unguarded)}"
    import kforge_nb.evaluator.worker.entry  # noqa: F401  (what the fork server imports)
    names = integrity.own_functions()
    for name in ("kforge_nb.evaluator.worker.common.load_weights",
                 "kforge_nb.evaluator.worker.common.profile_fresh",
                 "kforge_nb.evaluator.worker.judge.Judge.check",
                 "kforge_nb.evaluator.worker.candidate.Candidate.trial",
                 "kforge_nb.evaluator.worker.candidate.plain_outputs",
                 "kforge_nb.evaluator.worker.entry.candidate_main"):
        assert name in names, name


# --- the audit -------------------------------------------------------------------------------

def test_a_helper_that_forges_a_triton_file_name_is_still_the_candidates():
    import triton  # noqa: F401  (loads the package whose code is exempt)
    codes = audit.code_objects("triton")
    assert codes, "no Triton code objects found"
    forged_path = os.path.join(os.path.dirname(triton.__file__), "runtime", "jit.py")

    def helper(x):
        return torch.softmax(x, -1)
    forged = types.FunctionType(helper.__code__.replace(co_filename=forged_path), globals())
    watch = audit.Audit("candidate.py")
    audit.TRITON_CODE.update(codes)
    with watch:
        forged(torch.randn(4, 4))
    assert any(op == "_softmax" for op, _ in watch.compute), watch.compute


def test_torch_calls_only_outside_the_trials_are_named():
    audited, watched = audit.Calls(), audit.Calls()
    x = torch.randn(8)
    with audited:
        torch.empty_like(x)
    with watched:
        torch.empty_like(x)
        x.contiguous()
        torch.relu(x)
    assert audit.unaudited(watched.seen, audited.seen, frozenset()) == ["torch.relu"]
    assert audit.unaudited(watched.seen, audited.seen, frozenset({"relu"})) == []


# --- the run folder --------------------------------------------------------------------------

PLANTS = '''
import os as _os
_top = _os.path.dirname(_os.environ["HOME"])          # the run folder, above its HOME
_said = []
for _name in ("planted.txt", "result.json", ".result.json.tmp1-1"):
    try:
        if _name == "planted.txt":
            open(_os.path.join(_top, _name), "w").write("x")
        else:
            _os.symlink("/nonexistent/kforge-planted", _os.path.join(_top, _name))
        _said.append(_name + ": written")
    except OSError as _err:
        _said.append(_name + ": " + _err.strerror)
open(_os.path.join(_os.environ["HOME"], "said.txt"), "w").write("\\n".join(_said))
'''


def test_the_candidate_writes_its_home_and_exchange_never_the_run_folder_itself(options):
    """The parent writes result.json, logs and weights in the run folder: a link planted there
    would be followed by a process with your rights."""
    from kforge_nb.evaluator import evaluate
    from kforge_nb.result import CORRECT
    from tests.support.evaluator import candidate_source, load_problem
    result = evaluate(load_problem("relu"), candidate_source("cpp_relu") + PLANTS, "cpp",
                      options(measure=False))
    assert result.state == CORRECT, result.message
    folder = __import__("pathlib").Path(result.artifacts)
    said = (folder / "sandbox" / "said.txt").read_text().splitlines()
    assert len(said) == 3 and not any(line.endswith("written") for line in said), said
    assert not (folder / "planted.txt").exists()
    assert not (folder / "result.json").is_symlink()


def test_a_sparse_terabyte_output_is_never_allocated(tmp_path):
    """A header announcing 1 TiB, and a sparse file of that size behind it: the bytes match,
    but the judge reads no more than twice the reference's outputs."""
    path = tmp_path / "out.bin"
    header = json.dumps([{"dtype": "torch.float32", "shape": [1 << 38]}]).encode() + b"\n"
    with open(path, "wb") as f:
        f.write(header)
        f.truncate(len(header) + (1 << 40))
    with pytest.raises(transfer.TooLarge, match="more than twice"):
        transfer.read_tensors(str(path), "cpu", limit=1 << 20)
