"""The judge's worker: it runs the user's `Model` and never candidate code. For each trial it
draws the inputs from the trial's seed on the device, computes the reference outputs, and
compares the candidate's outputs (and its inputs as the candidate left them) with them, on the
device, a chunk at a time. It times the reference, block by block, interleaved with the
candidate.
"""
from __future__ import annotations

import os

import torch

from ...result import Correctness
from ..wire import messages, transfer
from . import correctness, harness, policy, trial_values
from .op_costs import FlopCount
from ..parent.process import available_memory
from .common import build, error_report, load_problem, profile_fresh, run_hook, start


def reference_main(conn, job: dict) -> None:
    start(job)
    device = job["device"]
    try:
        module = load_problem(job)
        fits, flops = size_check(module, job)
        if fits:
            conn.send({"problem_error": {"type": "TooLarge", "text": fits}})
            return
        model = build(module.Model, module, job, device)
    except BaseException as exc:
        conn.send({"problem_error": error_report(exc, job["problem_label"], job["problem_source"])})
        return
    harness.save_tensors(job["weights"], {k: v.detach().cpu() for k, v in
                                          model.state_dict().items()})
    conn.send({"ready": True, "has_weights": bool(model.state_dict())})
    Judge(conn, job, module, model, device, flops).serve()


def size_check(module, job: dict) -> tuple[str, int | None]:
    """Before allocating: will one set of inputs, outputs and weights fit, twice (the
    reference's and the candidate's)? Sizes (and FLOPs) come from running the problem on fake
    tensors, which hold no memory. Returns (why it does not fit or "", FLOPs or None)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    device = job["device"]
    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            torch.manual_seed(0)
            model = module.Model(*harness.argument_list(module.get_init_inputs(),
                                                        "get_init_inputs()"))
            inputs = harness.argument_list(module.get_inputs())
            with FlopCount() as counter, torch.no_grad():
                outputs = harness.as_tensor_list(model(*inputs))
            params = list(model.parameters()) + list(model.buffers())
        flops = counter.total()
    except Exception:
        return "", None      # a model fake tensors cannot run: find out for real
    sizes = [harness.tensor_bytes(x) for x in (inputs, outputs, params)]
    need = 2 * sum(sizes)
    if device == "cuda":
        have, where = torch.cuda.mem_get_info()[1] * 0.9, f"the GPU ({torch.cuda.get_device_name()})"
    else:
        free = available_memory()
        have, where = (free, "this host's memory") if free <= job["memory_bytes"] else \
            (job["memory_bytes"], "each worker's memory limit")
    if need <= have:
        return "", flops
    gib = lambda n: f"{n / 2**30:.1f} GiB"  # noqa: E731
    return (f"this problem needs about {gib(need)} on {device} (inputs {gib(sizes[0])}, outputs "
            f"{gib(sizes[1])}, weights {gib(sizes[2])}; the reference and the candidate each "
            f"hold one set) but {where} offers {gib(have)}: nothing was allocated. Reduce the "
            "sizes in get_inputs()/get_init_inputs(), or run it on a larger machine."), flops


class Judge:
    """The judge's command loop. It holds one trial (or the timing input sets) at a time."""

    def __init__(self, conn, job, module, model, device, flops):
        self.conn, self.job, self.module, self.model, self.device = conn, job, module, model, device
        self.flops = flops
        self.trial = None         # (trial, inputs, outputs) of the trial being judged
        self.sets: list = []      # timing input sets
        self.compiled: dict = {}  # policy -> the torch.compile'd model (prepare_compile)
        # torch.compile's mode for the "compile" baseline (--baseline; jobs predating it: default)
        self.compile_mode = job.get("compile_mode", "default")
        self.report = Correctness()

    def serve(self) -> None:
        """Serve the judge's rows of the message table (messages.py) until "stop"."""
        while True:
            command, args = messages.incoming(messages.JUDGE, self.conn.recv())
            if command == messages.STOP:
                return
            self.conn.send(getattr(self, command)(*args))

    def forward(self, inputs: list) -> list:
        with torch.no_grad():
            outputs = harness.as_tensor_list(self.model(*inputs))
        harness.synchronize(self.device)
        return outputs

    def prepare(self, index: int, trial: dict) -> dict:
        """Draw a trial's inputs and compute the reference. Only the outputs and the inputs'
        fingerprints are kept: the inputs themselves are not needed again."""
        self.trial = None
        try:
            inputs = harness.trial_inputs(self.module, trial, self.device)
            before = harness.fingerprints(inputs)
            if index == 0:
                summary = {"flops": self.flops if self.flops is not None else
                           count_flops(self.model, inputs),
                           "input_bytes": harness.tensor_bytes(inputs)}
            outputs = self.forward(inputs)
        except BaseException as exc:
            if trial.get("batch"):   # the module does not allow another batch size: skip it
                return {"skipped": f"reference rejects batch {trial['batch']}: {exc}"}
            if trial_values.is_tails(trial):   # nor values that far out
                return {"skipped": f"trial {trial['trial']} skipped: the reference rejects "
                                   f"{trial_values.DESCRIPTION}: {exc}"}
            return {"problem_error": error_report(exc, self.job["problem_label"],
                                                  self.job["problem_source"])}
        unusable = trial_values.unusable(trial, outputs)
        if unusable:
            return {"skipped": unusable}
        self.trial = (trial, before, outputs)
        self.report.trials = index + 1
        reply = {"prepared": trial}
        if index == 0:
            reply["summary"] = {**summary, "min_bytes": min_bytes(self.model, inputs, outputs),
                                "output_bytes": harness.tensor_bytes(outputs),
                                "output_shapes": [list(o.shape) for o in outputs],
                                "output_dtypes": [str(o.dtype) for o in outputs]}
        del inputs
        harness.release(self.device)        # the reference's temporaries: the candidate's now
        return reply

    def check(self, path: str, inputs_after: list) -> dict:
        """The candidate's outputs of the trial, read from its file a chunk at a time where
        they are compared (transfer.Streamed), and its inputs as it says it left them."""
        trial, before, outputs = self.trial
        exact = correctness.Float64Answer(
            self.model, lambda: harness.trial_inputs(self.module, trial, self.device))

        def compare(data: list) -> tuple[bool, str]:
            if len(inputs_after) != len(before):
                raise transfer.BadOutput(f"its reply fingerprints {len(inputs_after)} inputs; "
                                         f"the trial has {len(before)}")
            return correctness.check_trial(trial, before, outputs, inputs_after, data,
                                           self.job["policy"], self.report, exact)
        try:
            ok, text = candidates_outputs(path, outputs, compare)
        except transfer.TooLarge as err:
            self.report.failed_check = correctness.describe(trial)
            return {"ok": False, "text": f"{err} ({correctness.describe(trial)})",
                    "report": self.report.__dict__}
        except transfer.BadOutput as err:
            return {"bad_output": str(err)}
        self.trial = outputs = None
        harness.release(self.device)
        return {"ok": ok, "text": text, "report": self.report.__dict__}

    # -- timing, interleaved with the candidate's ---------------------------------------------
    def prepare_timing(self, trials: list[dict]) -> dict:
        self.sets = harness.timing_sets(self.module, trials, self.device)
        redraw, redraw_ms = harness.redraw_is_cheap(self.sets, self.device)
        if not redraw:
            self.sets.redraw = None
        self.forward(self.sets.sets[0])            # warm
        return {"sets": len(self.sets.sets), "redraw": redraw, "redraw_ms": redraw_ms,
                "policy": policy.describe(self.job["policy"], self.device)}

    def time(self, calls: int, under_policy: bool = False, compiled: bool = False,
             fastest: bool = False) -> dict:
        """A block of timed calls of the reference; `under_policy`: as a user would run it
        under the precision policy (a baseline only: the trials compare against fp32);
        `compiled`: the torch.compile'd model prepare_compile made (under that policy);
        `fastest`: the fastest call so far copied out and dropped, as the candidate's is
        kept, so both sides pay the same between calls."""
        under = self.job["policy"] if under_policy else "strict"
        model = self.compiled[under] if compiled else self.model
        with torch.no_grad(), policy.running_under(under, self.device):
            timed = harness.time_calls(lambda x: model(*x), self.sets, calls, self.device,
                                       fastest=fastest)
        harness.release(self.device)
        return timed

    def prepare_compile(self, under_policy: bool = False) -> dict:
        """torch.compile the model once (in the job's mode, under the policy, `under_policy`),
        for the timed rounds to run beside eager and the candidate: {"compiled": True} or
        {"error": why}.
        The compiled model is warmed on every timing set, so no round pays a recompile."""
        under = self.job["policy"] if under_policy else "strict"
        if not self.compiled:
            torch._dynamo.reset()   # a fresh compile: dynamo's guards need not cover every switch
        with torch.no_grad(), policy.running_under(under, self.device):
            compiled = compile_model(self.model, self.sets.sets[0], self.compile_mode)
            if isinstance(compiled, dict):
                return compiled
            try:
                for inputs in self.sets.sets[1:]:
                    compiled(*inputs)
                harness.synchronize(self.device)
            except Exception as exc:
                return {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        self.compiled[under] = compiled
        harness.release(self.device)
        return {"compiled": True}

    def check_sample(self, call: int, path: str, inputs_after: list) -> dict:
        """The candidate's output of timed call `call`, against the reference on its inputs;
        first its inputs as it says the call left them, against those inputs as drawn."""
        inputs = self.sets.inputs(call)
        refused = inputs_refused(self.sets.left(call, inputs), inputs_after)
        if refused:
            remove(path)        # not read: the call is refused on its inputs alone
            return refused
        outputs = self.forward(inputs)
        try:
            exact = correctness.Float64Answer(self.model, lambda: self.sets.inputs(call))
            ok, text = candidates_outputs(path, outputs, lambda data: correctness.compare_outputs(
                outputs, data, self.job["policy"], Correctness(), exact))
        except transfer.TooLarge as err:
            return {"ok": False, "text": str(err)}
        except transfer.BadOutput as err:
            return {"bad_output": str(err)}
        outputs = None
        harness.release(self.device)
        return {"ok": ok, "text": text}

    def profile(self, trace: str) -> dict:
        return profile_fresh(lambda x: self.model(*x), self.sets, self.device, trace)

    def measure_hook(self, source: str, label: str, trial: dict) -> dict:
        return run_hook(source, label, self.model, self.module, trial, self.device)


def inputs_refused(before: list, after: list) -> dict | None:
    """A kept timed call refused on what the candidate says its inputs were after it: another
    number of them (`bad_output`), or one modified in place (`modified`: which); else None."""
    if len(after) != len(before):
        return {"bad_output": f"its reply fingerprints {len(after)} inputs; the call has "
                              f"{len(before)}"}
    modified = correctness.first_modified(before, after)
    if modified is None:
        return None
    return {"ok": False, "modified": modified, "text": f"input {modified} was modified in place"}


def candidates_outputs(path: str, outputs: list, compare) -> tuple[bool, str]:
    """compare(data) over the candidate's output file at `path` (removed after), read a chunk
    at a time. The file is the candidate's to write: whatever is wrong with it, reading it
    raises BadOutput (transfer checks every byte it uses), the candidate's doing and never the
    reference failing; what compare itself raises stays the judge's own."""
    try:
        with transfer.open_outputs(path, outputs_limit(outputs)) as data:
            return compare(data)
    finally:
        remove(path)


def outputs_limit(outputs: list) -> int:
    """The most bytes the judge reads back for outputs like these: twice theirs (a wrong
    shape is still reported), never the terabyte a sparse file can announce."""
    return 2 * harness.tensor_bytes(outputs) + (1 << 20)


def remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def count_flops(model, inputs) -> int | None:
    try:
        with FlopCount() as counter, torch.no_grad():
            model(*inputs)
        return counter.total()
    except Exception:
        return None


def min_bytes(model, inputs, outputs) -> int:
    """Each input, parameter and buffer read once, each output written once."""
    return harness.tensor_bytes(list(inputs) + list(outputs) + list(model.parameters())
                                + list(model.buffers()))


def compile_model(model, inputs, mode: str = "default"):
    """torch.compile'd model in `mode` ("default", "max-autotune"), run once (the
    compilation); or {"error": why} when it fails."""
    try:
        compiled = torch.compile(model, mode=None if mode == "default" else mode)
        compiled(*inputs)
        return compiled
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
