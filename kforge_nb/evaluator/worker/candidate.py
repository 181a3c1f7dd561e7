"""The candidate's worker, in its sandbox: it draws the same inputs from the same seeds (the
problem's `get_inputs` is loaded before the candidate, and guarded), runs the candidate under
the audit of what it dispatched and launched, and streams its outputs to a file for the judge.
What it replies is checked in the parent (replies.py); the integrity check's snapshot is taken
before the candidate's code is imported.
"""
from __future__ import annotations

from pathlib import Path

import torch

from ..wire import messages, transfer
from . import audit, harness, integrity, nsight
from .common import build, error_report, load_problem, load_weights, profile_fresh, run_hook, start


def candidate_main(conn, job: dict) -> None:
    start(job)
    filename, source = job["filename"], job["source"]
    from ...targets import get_target
    target = get_target(job["target"])
    problem = load_problem(job) if job.get("problem_source") else None
    audit.count_launches()
    guarded = {"get_inputs": (problem, "get_inputs"),
               "get_init_inputs": (problem, "get_init_inputs")} if problem else {}
    before = integrity.snapshot(guarded)

    def fail(exc: BaseException, phase: str) -> None:
        state = "compile_failure" if target.is_compile_error(exc) else "runtime_error"
        report = error_report(exc, filename, source)
        conn.send({"failed": {"state": state, "phase": phase, **report},
                   "tampered": integrity.changed(before)})

    # what the sandbox holds, said before any of the candidate's code runs in this process
    # (after that, anything this process says is the candidate's to forge)
    conn.send({"sandbox": job.get("sandbox_report") or {}})
    try:
        module = harness.load_module(source, filename, "kforge_candidate")
    except BaseException as exc:
        return fail(exc, "build")
    conn.send({"built": True})
    if job["compile_only"]:
        return
    command, args = messages.incoming(messages.CANDIDATE, conn.recv())
    if command != "construct":
        return
    weights_path, = args
    device = job["device"]
    construction = audit.Calls()        # watched too: what __init__ computes is said
    try:
        cls = getattr(module, "ModelNew", None) or getattr(module, "NewModel")
        with construction:
            model = build(cls, problem, job, device)
        weights = load_weights(model, harness.torch_load(weights_path, weights_only=True), device)
    except BaseException as exc:
        return fail(exc, "construct")
    poison_allocator(device)
    allowed = frozenset(job.get("allowed_ops") or ())
    conn.send({"constructed": True, "weights": weights, "tampered": integrity.changed(before),
               "construction": audit.unaudited(construction.seen, set(), allowed),
               "unaudited": audit.thread_compute()})
    Candidate(conn, job, problem, model, device, before, fail).serve()


class Candidate:
    """The candidate worker's command loop: trials under audit, timing blocks, samples."""

    def __init__(self, conn, job, problem, model, device, before, fail):
        self.conn, self.job, self.problem, self.model, self.device = conn, job, problem, model, device
        self.before, self.fail = before, fail
        self.sets: list = []
        self.kept: dict = {}      # timed call number -> its output, until the judge has it
        self.allowed = frozenset(job.get("allowed_ops") or ())
        self.audited = audit.Calls()   # torch functions the audited trials called
        self.watched = audit.Calls()   # ... and every other call of the candidate's forward

    def serve(self) -> None:
        """Serve the candidate's rows of the message table (messages.py) until "stop"."""
        while True:
            command, args = messages.incoming(messages.CANDIDATE, self.conn.recv())
            if command == messages.STOP:
                return
            try:
                reply = getattr(self, command)(*args)
            except BaseException as exc:
                return self.fail(exc, f"{command} {args[0] if args else ''}".strip())
            reply["tampered"] = integrity.changed(self.before)
            reply["unaudited"] = audit.unaudited(self.watched.seen, self.audited.seen,
                                                 self.allowed) + audit.thread_compute()
            self.conn.send(reply)

    def audited_forward(self, inputs: list) -> tuple[list, dict]:
        launches = audit.Counter(audit.LAUNCHES)
        watch = audit.Audit(self.job["filename"], self.allowed)
        with torch.no_grad(), self.audited, watch:
            value = self.model(*inputs)
        harness.synchronize(self.device)
        return value, audit.report(watch, launches)

    def forward(self, inputs: list):
        """A call outside the trials: the same forward, under the cheap watch."""
        with torch.no_grad(), self.watched:
            return self.model(*inputs)

    def trial(self, index: int, trial: dict, path: str) -> dict:
        inputs = harness.trial_inputs(self.problem, trial, self.device)
        value, seen = self.audited_forward(inputs)
        outputs, odd = plain_outputs(value)
        if odd:
            return {"odd_output": odd, "audit": seen}
        transfer.write_tensors(path, outputs)
        after = harness.fingerprints(inputs)
        del value, outputs, inputs
        harness.release(self.device)
        return {"written": path, "audit": seen, "inputs_after": after}

    def prepare_timing(self, trials: list[dict]) -> dict:
        self.sets = harness.timing_sets(self.problem, trials, self.device)
        self.forward(self.sets.sets[0])        # warm
        return {"sets": len(self.sets.sets)}

    def time(self, calls: int, keep: list[int], fastest: bool = False) -> dict:
        """A block of timed calls; the outputs of the calls in `keep` (and with `fastest`, of
        the block's fastest call) are kept for the judge, who asks for them right after."""
        self.kept.clear()
        with torch.no_grad():
            timed = harness.time_calls(lambda inputs: self.model(*inputs), self.sets, calls,
                                       self.device, keep=keep, kept=self.kept,
                                       watch=self.watched, fastest=fastest)
        harness.release(self.device)
        return timed

    def kept_output(self, call: int, path: str) -> dict:
        """The output timed call `call` returned, as it was returned (not recomputed), and its
        inputs' fingerprints as the call left them."""
        harness.synchronize(self.device)
        value, after = self.kept.pop(call)
        outputs, odd = plain_outputs(value)
        harness.release(self.device)
        if odd:
            return {"odd_output": odd, "audit": {"compute": [], "launches": {}}}
        transfer.write_tensors(path, outputs)
        return {"written": path, "audit": {"compute": [], "launches": {}}, "inputs_after": after}

    def profile(self, trace: str) -> dict:
        return profile_fresh(self.forward, self.sets, self.device, trace)

    def nsight(self, prefix: list[str], weights: str, trial: dict, timeout_s: float) -> dict:
        """Nsight Compute's counters of one forward, from a child of this worker (nsight.py)."""
        job = {key: self.job[key] for key in ("source", "filename", "problem_source",
                                              "problem_label", "device", "init_seed",
                                              "precision", "env")}
        return nsight.profile(prefix, {**job, "weights": weights, "trial": trial},
                              Path(self.job["filename"]).parent / "exchange", timeout_s)

    def measure_hook(self, source: str, label: str, trial: dict) -> dict:
        # outside the audit: the hook may call the model and synchronise as it likes
        return run_hook(source, label, self.model, self.problem, trial, self.device)

def plain_outputs(value) -> tuple[list, str]:
    """The forward's tensors, or why they are not plain tensors (a subclass can lie about its
    values when compared; it is not an answer)."""
    try:
        outputs = harness.as_tensor_list(value)
    except TypeError as exc:     # None (a missing `return`?), a dict, a string, an array
        return [], f"ModelNew.{str(exc)}"
    for k, o in enumerate(outputs):
        if type(o) is not torch.Tensor and not isinstance(o, torch.nn.Parameter):
            return outputs, f"output {k} is a {type(o).__module__}.{type(o).__name__}, " \
                            "not a plain torch.Tensor"
    return outputs, ""


def poison_allocator(device: str) -> None:
    """Fill the caching allocator's free blocks with NaN: an unwritten output reads NaN."""
    if device == "cuda":
        free, _ = torch.cuda.mem_get_info()
        block = torch.full((min(free // 8, 1 << 30) // 4,), float("nan"), device="cuda")
        del block
