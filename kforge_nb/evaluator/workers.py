"""The two child processes of an evaluation. Nothing here decides a verdict.

* The reference worker runs the user's `Model`: it draws every trial's inputs, computes the
  reference outputs and weights, and times the eager and torch.compile baselines.
* The candidate worker runs the candidate: it loads the reference's weights and inputs from a
  file, writes the candidate's outputs (and the inputs as they were left) to a file, and on
  request times and profiles it. The parent compares the files.

Both are forked from a server process that has already imported torch, so each evaluation pays
a fork, not an interpreter start. Messages to the parent are plain dicts over a pipe.
"""
from __future__ import annotations

import os
import sys
import traceback

import torch
import torch._dynamo  # noqa: F401  (the profiler and torch.compile import it: ~1 s, paid once
#                     in the fork server; it also rewraps torch.manual_seed, before any snapshot)

from . import harness, integrity


def redirect_output(log_path: str) -> None:
    """Send this process's stdout/stderr (and its compilers') to the log file."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def start(job: dict) -> None:
    os.setsid()  # own process group: the parent can kill compilers we start along with us
    os.environ.update(job.get("env", {}))
    redirect_output(job["log"])
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
    if frames:
        report["line"], report["source_line"] = frames[-1].lineno, frames[-1].line
    log = getattr(exc, "log", None)
    if log is not None:  # a native compiler error: map its line into the candidate file
        report["log"] = log[-8000:]
        native_source = getattr(exc, "source", "")
        if exc.line and native_source and native_source in source:
            offset = source[:source.index(native_source)].count("\n")
            report["line"], report["source_line"] = offset + exc.line, exc.source_line
            report["native_line"] = exc.line
    return report


# --- reference ----------------------------------------------------------------------------------


def reference_main(conn, job: dict) -> None:
    start(job)
    device = job["device"]
    try:
        module = harness.load_module(job["source"], job["label"], "kforge_reference")
        torch.manual_seed(job["init_seed"])
        init_inputs = list(module.get_init_inputs())
        model = module.Model(*init_inputs).to(device)
    except BaseException as exc:
        conn.send({"problem_error": error_report(exc, job["label"], job["source"])})
        return

    trials = []
    for trial in job["trials"]:
        try:
            inputs = harness.trial_inputs(module, trial)
            with torch.no_grad():
                outputs = harness.as_tensor_list(model(*harness.to_device(inputs, device)))
            harness.synchronize(device)
        except BaseException as exc:
            if trial.get("batch"):   # the module does not allow another batch size: skip it
                trials.append({**trial, "skipped": f"reference rejects batch {trial['batch']}: {exc}"})
                continue
            conn.send({"problem_error": error_report(exc, job["label"], job["source"])})
            return
        trials.append({**trial, "inputs": [x.cpu() if isinstance(x, torch.Tensor) else x
                                           for x in inputs],
                       "outputs": [o.detach().cpu() for o in outputs]})
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    harness.save_tensors(job["data"], {"init_inputs": init_inputs, "state_dict": state,
                                       "trials": trials})

    first = harness.to_device(trials[0]["inputs"], device)
    summary = {"flops": count_flops(model, first), "min_bytes": min_bytes(model, trials[0]),
               "output_shapes": [list(o.shape) for o in trials[0]["outputs"]],
               "output_dtypes": [str(o.dtype) for o in trials[0]["outputs"]],
               "skipped": [t["skipped"] for t in trials if "skipped" in t]}
    with torch.no_grad():
        if "eager" in job["baselines"]:
            summary["eager"] = harness.time_callable(lambda: model(*first), device)
            summary["events"] = harness.profile_callable(lambda: model(*first), device,
                                                         job["trace"])
        if "compile" in job["baselines"]:
            summary["compile"] = time_compiled(model, first, device)
    conn.send({"done": summary})


def count_flops(model, inputs) -> int | None:
    try:
        from torch.utils.flop_counter import FlopCounterMode
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            model(*inputs)
        return int(counter.get_total_flops())
    except Exception:
        return None


def min_bytes(model, trial: dict) -> int:
    """Each input, parameter and buffer read once, each output written once."""
    tensors = [x for x in trial["inputs"] if isinstance(x, torch.Tensor)] + trial["outputs"]
    tensors += list(model.parameters()) + list(model.buffers())
    return int(sum(t.numel() * t.element_size() for t in tensors))


def time_compiled(model, inputs, device) -> dict:
    try:
        compiled = torch.compile(model)
        compiled(*inputs)
        return harness.time_callable(lambda: compiled(*inputs), device)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}


# --- candidate ----------------------------------------------------------------------------------


def candidate_main(conn, job: dict) -> None:
    start(job)
    before = integrity.snapshot()
    # Read before the candidate is imported; a compile-only job has no reference data.
    reference = None if job["compile_only"] else harness.torch_load(job["data"],
                                                                    weights_only=False)
    device, filename, source = job["device"], job["filename"], job["source"]
    from ..targets import get_target
    target = get_target(job["target"])

    def fail(exc: BaseException, phase: str) -> None:
        state = "compile_failure" if target.is_compile_error(exc) else "runtime_error"
        report = error_report(exc, filename, source)
        conn.send({"failed": {"state": state, "phase": phase, **report},
                   "tampered": integrity.changed(before)})

    try:
        module = harness.load_module(source, filename, "kforge_candidate")
    except BaseException as exc:
        return fail(exc, "build")
    if job["compile_only"]:
        return conn.send({"compiled": True})

    try:
        cls = getattr(module, "ModelNew", None) or getattr(module, "NewModel")
        torch.manual_seed(job["init_seed"])
        model = cls(*reference["init_inputs"]).to(device)
        weights = load_weights(model, reference["state_dict"], device)
    except BaseException as exc:
        return fail(exc, "construct")

    poison_allocator(device)
    results = []
    for i, trial in enumerate(reference["trials"]):
        if "skipped" in trial:
            continue
        try:
            inputs = harness.to_device([x.clone() if isinstance(x, torch.Tensor) else x
                                        for x in trial["inputs"]], device)
            with torch.no_grad():
                outputs = harness.as_tensor_list(model(*inputs))
            harness.synchronize(device)
        except BaseException as exc:
            return fail(exc, f"trial {i}")
        results.append({"outputs": [o.detach().cpu() for o in outputs],
                        "inputs_after": [x.cpu() if isinstance(x, torch.Tensor) else x
                                         for x in inputs]})
    harness.save_tensors(job["outputs"], results)
    conn.send({"outputs": job["outputs"], "weights": weights,
               "tampered": integrity.changed(before)})

    first = harness.to_device([x.clone() if isinstance(x, torch.Tensor) else x
                               for x in reference["trials"][0]["inputs"]], device)
    while True:
        command = conn.recv()
        with torch.no_grad():
            if command == "time":
                timing = harness.time_callable(lambda: model(*first), device, **job["timing"])
                conn.send({"timing": timing, "tampered": integrity.changed(before)})
            elif command == "profile":
                events = harness.profile_callable(lambda: model(*first), device, job["trace"])
                conn.send({"events": events, "tampered": integrity.changed(before)})
            else:
                return


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
