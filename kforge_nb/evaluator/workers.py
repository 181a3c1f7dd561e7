"""The two child processes of an evaluation. Neither decides a verdict; the parent does.

* The judge runs the user's `Model` and never candidate code. For each trial it draws the
  inputs from the trial's seed on the device, computes the reference outputs, and compares the
  candidate's outputs (and its inputs as the candidate left them) with them, on the device, a
  chunk at a time. It times the reference, block by block, interleaved with the candidate.
* The candidate worker runs in the sandbox. It draws the same inputs from the same seeds (the
  problem's `get_inputs` is loaded before the candidate, and guarded), runs the candidate under
  the audit of what it dispatched and launched, and streams its outputs to a file for the judge.

Both are forked from a server that has already imported torch. Commands and replies are plain
tuples and dicts over a pipe; the parent drives both, one step at a time.
"""
from __future__ import annotations

import math
import os
import statistics
import traceback
from pathlib import Path

import torch
import torch._dynamo  # noqa: F401  (the profiler and torch.compile import it: ~1 s, paid once
#                     in the fork server; it also rewraps torch.manual_seed, before any snapshot)

from . import audit, correctness, harness, integrity, nsight, policy, transfer
from ..result import Correctness
from .process import available_memory


def start(job: dict) -> None:
    os.environ.update(job.get("env", {}))
    # cuDNN convolutions default to TF32 on NVIDIA GPUs. The reference is the truth and is
    # always computed in full fp32; a candidate gets TF32 only when the policy says so.
    tf32 = job.get("precision", "strict") != "strict"
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32


def error_report(exc: BaseException, filename: str, source: str) -> dict:
    """What a person needs from an exception: type, message, the failing line of `filename`."""
    def in_file(error: BaseException) -> list:
        return [f for f in traceback.extract_tb(error.__traceback__) if f.filename == filename]

    frames = in_file(exc)
    cause = exc.__cause__ or exc.__context__
    # An explicit cause is nearer the fault (Triton's interpreter re-raises a kernel's error
    # from the launch line): prefer its line in the candidate when it has one.
    if cause is not None and (exc.__cause__ is not None or not frames):
        frames = in_file(cause) or frames
    report = {"type": type(exc).__name__, "text": str(exc)[:4000],
              "traceback": "".join(traceback.format_exception(exc, limit=-8))[-6000:]}
    if isinstance(exc, torch.cuda.OutOfMemoryError):
        report["kind"] = "gpu_out_of_memory"
    if frames:
        line = frames[-1].lineno
        lines = source.splitlines()
        # the text judged, not what linecache finds on disk (nothing, for a "<name>" label)
        text = lines[line - 1].strip() if line and 0 < line <= len(lines) else frames[-1].line
        report["line"], report["source_line"] = line, text
    log = getattr(exc, "log", None)
    if log is not None:  # a native compiler error: map its line into the candidate file
        report["log"] = log[-8000:]
        native_source = getattr(exc, "source", "")
        if exc.line and native_source and native_source in source:
            offset = source[:source.index(native_source)].count("\n")
            report["line"], report["source_line"] = offset + exc.line, exc.source_line
            report["native_line"] = exc.line
    return report


def load_problem(job: dict):
    return harness.load_module(job["problem_source"], job["problem_label"], "kforge_reference")


def build(cls, problem, job: dict, device: str):
    """`cls` built with the problem's constructor arguments, drawn from the same seed."""
    torch.manual_seed(job["init_seed"])
    init_inputs = harness.argument_list(problem.get_init_inputs(), "get_init_inputs()")
    torch.manual_seed(job["init_seed"])
    return cls(*init_inputs).to(device)


# --- the judge (reference) ----------------------------------------------------------------------


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
    from torch.utils.flop_counter import FlopCounterMode
    device = job["device"]
    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            torch.manual_seed(0)
            model = module.Model(*harness.argument_list(module.get_init_inputs(),
                                                        "get_init_inputs()"))
            inputs = harness.argument_list(module.get_inputs())
            with FlopCounterMode(display=False) as counter, torch.no_grad():
                outputs = harness.as_tensor_list(model(*inputs))
            params = list(model.parameters()) + list(model.buffers())
        flops = int(counter.get_total_flops())
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
        self.report = Correctness()

    def serve(self) -> None:
        while True:
            command, *args = self.conn.recv()
            if command == "stop":
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
            before = [harness.fingerprint(x) if isinstance(x, torch.Tensor) else None
                      for x in inputs]
            if index == 0:
                summary = {"flops": self.flops if self.flops is not None else
                           count_flops(self.model, inputs),
                           "input_bytes": harness.tensor_bytes(inputs)}
            outputs = self.forward(inputs)
        except BaseException as exc:
            if trial.get("batch"):   # the module does not allow another batch size: skip it
                return {"skipped": f"reference rejects batch {trial['batch']}: {exc}"}
            return {"problem_error": error_report(exc, self.job["problem_label"],
                                                  self.job["problem_source"])}
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
        they are compared (transfer.Streamed)."""
        trial, before, outputs = self.trial
        try:
            with transfer.open_outputs(path, outputs_limit(outputs)) as data:
                ok, text = correctness.check_trial(trial, before, outputs, inputs_after, data,
                                                   self.job["policy"], self.report)
        except transfer.TooLarge as err:
            self.report.failed_check = correctness.describe(trial)
            return {"ok": False, "text": f"{err} ({correctness.describe(trial)})",
                    "report": self.report.__dict__}
        except transfer.BadOutput as err:
            return {"bad_output": str(err)}
        finally:
            remove(path)
        self.trial = outputs = None
        harness.release(self.device)
        return {"ok": ok, "text": text, "report": self.report.__dict__}

    # -- timing, interleaved with the candidate's ---------------------------------------------
    def prepare_timing(self, trials: list[dict]) -> dict:
        self.sets = harness.TimingSets([harness.trial_inputs(self.module, t, self.device)
                                        for t in trials])
        self.forward(self.sets.sets[0])            # warm
        return {"sets": len(self.sets.sets),
                "policy": policy.describe(self.job["policy"], self.device)}

    def time(self, calls: int, under_policy: bool = False, compiled: bool = False) -> dict:
        """A block of timed calls of the reference; `under_policy`: as a user would run it
        under the precision policy (a baseline only: the trials compare against fp32);
        `compiled`: the torch.compile'd model prepare_compile made (under that policy)."""
        under = self.job["policy"] if under_policy else "strict"
        model = self.compiled[under] if compiled else self.model
        with torch.no_grad(), policy.running_under(under, self.device):
            timed = harness.time_calls(lambda x: model(*x), self.sets, calls, self.device)
        harness.release(self.device)
        return timed

    def prepare_compile(self, under_policy: bool = False) -> dict:
        """torch.compile the model once (under the policy, `under_policy`), for the timed
        rounds to run beside eager and the candidate: {"compiled": True} or {"error": why}.
        The compiled model is warmed on every timing set, so no round pays a recompile."""
        under = self.job["policy"] if under_policy else "strict"
        if not self.compiled:
            torch._dynamo.reset()   # a fresh compile: dynamo's guards need not cover every switch
        with torch.no_grad(), policy.running_under(under, self.device):
            compiled = compile_model(self.model, self.sets.sets[0])
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

    def check_sample(self, call: int, path: str) -> dict:
        """The candidate's output of timed call `call`, against the reference on its inputs."""
        outputs = self.forward(self.sets.inputs(call))
        try:
            with transfer.open_outputs(path, outputs_limit(outputs)) as data:
                ok, text = correctness.compare_outputs(outputs, data, self.job["policy"],
                                                       Correctness())
        except transfer.TooLarge as err:
            return {"ok": False, "text": str(err)}
        except transfer.BadOutput as err:
            return {"bad_output": str(err)}
        finally:
            remove(path)
        del outputs
        harness.release(self.device)
        return {"ok": ok, "text": text}

    def profile(self, trace: str) -> dict:
        return profile_fresh(lambda x: self.model(*x), self.sets, self.device, trace)

    def measure_hook(self, source: str, label: str, trial: dict) -> dict:
        return run_hook(source, label, self.model, self.module, trial, self.device)

    def baselines(self, under: str = "strict") -> dict:
        """Eager and torch.compile in alternating blocks (a burst of load hits both sides):
        a display, cached per problem (and policy, `under` one). The ratio is the median of
        the blocks' ratios."""
        inputs = self.sets.sets[0]
        torch._dynamo.reset()   # a fresh compile: dynamo's guards need not cover every switch
        with torch.no_grad(), policy.running_under(under, self.device):
            compiled = compile_model(self.model, inputs)
            if isinstance(compiled, dict):
                return {"eager": harness.time_callable(lambda: self.model(*inputs), self.device),
                        "compile": compiled}
            blocks = []
            for k in range(6):
                pair = [lambda: self.model(*inputs), lambda: compiled(*inputs)]
                timed = [harness.time_callable(fn, self.device, calls=10)["median_ms"]
                         for fn in (pair if k % 2 == 0 else pair[::-1])]
                blocks.append(timed if k % 2 == 0 else timed[::-1])
        eager = statistics.median(b[0] for b in blocks)
        ratio = statistics.median(b[0] / b[1] for b in blocks if b[1] > 0)
        return {"eager": {"median_ms": eager}, "compile": {"median_ms": eager / ratio}}


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
        from torch.utils.flop_counter import FlopCounterMode
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            model(*inputs)
        return int(counter.get_total_flops())
    except Exception:
        return None


def min_bytes(model, inputs, outputs) -> int:
    """Each input, parameter and buffer read once, each output written once."""
    return harness.tensor_bytes(list(inputs) + list(outputs) + list(model.parameters())
                                + list(model.buffers()))


def compile_model(model, inputs):
    """torch.compile'd model, run once (the compilation); or {"error": why} when it fails."""
    try:
        compiled = torch.compile(model)
        compiled(*inputs)
        return compiled
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}


# --- the candidate ------------------------------------------------------------------------------


def candidate_main(conn, job: dict) -> None:
    start(job)
    filename, source = job["filename"], job["source"]
    from ..targets import get_target
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
    command, weights_path = conn.recv()
    if command != "construct":
        return
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
        while True:
            command, *args = self.conn.recv()
            if command == "stop":
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
        after = [harness.fingerprint(x) if isinstance(x, torch.Tensor) else None for x in inputs]
        del value, outputs, inputs
        harness.release(self.device)
        return {"written": path, "audit": seen, "inputs_after": after}

    def prepare_timing(self, trials: list[dict]) -> dict:
        self.sets = harness.TimingSets([harness.trial_inputs(self.problem, t, self.device)
                                        for t in trials])
        self.forward(self.sets.sets[0])        # warm
        return {"sets": len(self.sets.sets)}

    def time(self, calls: int, keep: list[int], hold: bool = True) -> dict:
        """A block of timed calls; the outputs of the calls in `keep` are kept for the judge
        (`hold`: every output of the block lives until it ends)."""
        with torch.no_grad():
            timed = harness.time_calls(lambda inputs: self.model(*inputs), self.sets, calls,
                                       self.device, keep=keep, kept=self.kept,
                                       hold_outputs=hold, watch=self.watched)
        harness.release(self.device)
        return timed

    def kept_output(self, call: int, path: str) -> dict:
        """The output timed call `call` returned, as it was returned (not recomputed)."""
        harness.synchronize(self.device)
        outputs, odd = plain_outputs(self.kept.pop(call))
        harness.release(self.device)
        if odd:
            return {"odd_output": odd, "audit": {"compute": [], "launches": {}}}
        transfer.write_tensors(path, outputs)
        return {"written": path, "audit": {"compute": [], "launches": {}}}

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


def run_hook(source: str, label: str, model, problem, trial: dict, device: str) -> dict:
    """The user's measure(model, inputs) (--measure), on inputs drawn from `trial`'s seed as the
    trials draw them: {"values": {name: float}, "errors": [...]}. It never raises: a hook's
    failure is reported, and the verdict is already decided."""
    try:
        hook = harness.load_module(source, label, "kforge_measure_hook")
        inputs = harness.trial_inputs(problem, trial, device)
        with torch.no_grad():                  # as the trials and the timed calls run
            returned = hook.measure(model, inputs)
        harness.synchronize(device)
        return hook_values(returned)
    except BaseException as exc:               # SystemExit too: this worker must answer
        err = error_report(exc, label, source)
        where = f" at {label} line {err['line']} ({err['source_line']})" if err.get("line") else ""
        return {"values": {}, "errors": [f"measure() raised {err['type']}: "
                                         f"{err['text'][:300]}{where}"]}
    finally:
        harness.release(device)


def hook_values(returned) -> dict:
    """measure()'s dict as finite numbers by name; any other value is an error for its key."""
    if not isinstance(returned, dict):
        return {"values": {}, "errors": [f"measure() returned {harness.describe_value(returned)}"
                                         ", not a dict of numbers"]}
    values, errors = {}, []
    for key, value in returned.items():
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if number and math.isfinite(float(value)):
            values[str(key)] = float(value)
        else:
            hint = " (use .item())" if isinstance(value, torch.Tensor) else ""
            errors.append(f"{key!r} is {harness.describe_value(value)}, not a finite "
                          f"number{hint}")
    return {"values": values, "errors": errors}


PROFILED_CALLS = 5


def profile_fresh(forward, sets, device: str, trace: str,
                  calls: int = PROFILED_CALLS) -> dict:
    """`calls` calls of `forward(inputs)`, each profiled on its own, on inputs refreshed just
    before (outside the profile): what the trace shows is the kernel at work, never a memo
    serving an answer it has seen. The call of median duration is the one kept (its trace and
    events): one call alone may be the one a time slice was lost in, or a cold cache's.
    {"events": its events, "calls_ms": every profiled call's duration, "picked": its index}."""
    profiled = []
    for _ in range(max(1, calls)):
        inputs = sets.inputs(sets.calls)
        sets.calls += 1
        harness.synchronize(device)
        with torch.no_grad():
            profiled.append(harness.profile_call(lambda: forward(inputs), device))
    order = sorted(range(len(profiled)), key=lambda i: profiled[i][1])
    picked = order[(len(order) - 1) // 2]
    profiled[picked][0].export_chrome_trace(trace)
    return {"events": harness.kernel_events(trace, device), "picked": picked,
            "calls_ms": [ms for _, ms in profiled]}


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


def load_weights(model, state: dict, device: str) -> str:
    """Copy the reference's weights when the parameter names match; else rely on the seed."""
    mine = model.state_dict()
    if state and set(mine) == set(state) and all(mine[k].shape == state[k].shape for k in state):
        model.load_state_dict({k: v.to(device) for k, v in state.items()})
        return "copied from the reference (parameter names match)"
    if not state:
        return "none (the reference has no parameters)"
    return "seeded identically (parameter names differ from the reference's)"


def poison_allocator(device: str) -> None:
    """Fill the caching allocator's free blocks with NaN: an unwritten output reads NaN."""
    if device == "cuda":
        free, _ = torch.cuda.mem_get_info()
        block = torch.full((min(free // 8, 1 << 30) // 4,), float("nan"), device="cuda")
        del block
