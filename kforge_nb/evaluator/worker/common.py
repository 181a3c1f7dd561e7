"""What both worker processes share: the job's settings applied, the problem loaded, a model
built from the same seed, the reference's weights copied in, exceptions reported with the
failing line, the user's measure() hook, and profiles of fresh calls.

Runs only inside worker children (and the Nsight Compute child, nsight.py); its functions are
under the integrity check (integrity.OWN_MODULES).
"""
from __future__ import annotations

import math
import os
import traceback

import torch
import torch._dynamo  # noqa: F401  (the profiler and torch.compile import it: ~1 s, paid once
#                     in the fork server; it also rewraps torch.manual_seed, before any snapshot)

from . import harness


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


def load_weights(model, state: dict, device: str) -> str:
    """Copy the reference's weights when the parameter names match; else rely on the seed."""
    mine = model.state_dict()
    if state and set(mine) == set(state) and all(mine[k].shape == state[k].shape for k in state):
        model.load_state_dict({k: v.to(device) for k, v in state.items()})
        return "copied from the reference (parameter names match)"
    if not state:
        return "none (the reference has no parameters)"
    return "seeded identically (parameter names differ from the reference's)"


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
