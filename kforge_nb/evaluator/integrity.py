"""Detect a candidate that patches the functions a verdict or a timing could rest on.

The verdict itself is decided in the parent process, out of the candidate's reach; this check
turns an attempt into a named `rejected` rule instead of letting it pass silently. It covers
torch's and Python's clocks and comparisons, and every function and class of kforge's own
worker modules (the harness's timer, the writer of the outputs, the fingerprint, the audit):
rebinding one, or swapping its code object in place, is tampering.
"""
from __future__ import annotations

import builtins
import importlib
import types

GUARDED = [
    "time.perf_counter", "time.perf_counter_ns", "time.time", "time.monotonic",
    "time.process_time",
    "torch.allclose", "torch.isclose", "torch.equal", "torch.testing.assert_close",
    "torch.Tensor.__eq__", "torch.Tensor.allclose", "torch.Tensor.to", "torch.Tensor.cpu",
    "torch.Tensor.clone", "torch.save", "torch.load", "torch.manual_seed",
    "torch.cuda.synchronize", "torch.cuda.Event", "torch.cuda.Event.record",
    "torch.cuda.Event.elapsed_time", "torch.cuda.Event.synchronize",
    "torch.profiler.profile", "torch.nn.Module.__call__",
    "builtins.print", "builtins.open", "builtins.__import__",
    "json.dump", "json.dumps", "os.replace",
]


def resolve(path: str):
    module_name, _, rest = path.partition(".")
    obj = builtins if module_name == "builtins" else importlib.import_module(module_name)
    for part in rest.split("."):
        obj = getattr(obj, part)
    return obj


# every module whose code runs in a worker once the candidate is loaded (a new one joins here;
# tests/test_trust_protocol.py checks that the workers' imports are all listed)
OWN_MODULES = ("harness", "transfer", "audit", "workers", "worker_common", "judge_worker",
               "candidate_worker", "correctness", "integrity", "wire", "policy", "nsight",
               "op_costs")


def own_functions() -> dict[str, tuple[object, str]]:
    """name -> (module, attribute) for every function and class of kforge's worker modules."""
    import sys
    out = {}
    for short in OWN_MODULES:
        module = sys.modules.get(f"kforge_nb.evaluator.{short}")
        if module is None:
            continue
        for attribute, value in list(vars(module).items()):
            if (callable(value) or isinstance(value, types.ModuleType)) and \
                    not attribute.startswith("__"):     # functions, classes, imported modules
                out[f"kforge_nb.evaluator.{short}.{attribute}"] = (module, attribute)
            if isinstance(value, type) and value.__module__ == module.__name__:
                for method, member in list(vars(value).items()):
                    if callable(getattr(member, "__func__", member)) and \
                            not (method.startswith("__") and method != "__init__"):
                        out[f"kforge_nb.evaluator.{short}.{attribute}.{method}"] = (value, method)
    return out


def code_of(value):
    return getattr(getattr(value, "__func__", value), "__code__", None)


def snapshot(extra: dict[str, tuple[object, str]] | None = None) -> dict[str, tuple]:
    """The guarded functions as they are now, plus `extra`: name -> (holder, attribute), e.g.
    the problem's get_inputs, which the candidate worker calls to draw each trial's inputs."""
    taken = {}
    for path in GUARDED:
        try:
            value = resolve(path)
        except (AttributeError, ImportError):
            continue
        taken[path] = (None, path, value, code_of(value))
    for name, (holder, attribute) in {**own_functions(), **(extra or {})}.items():
        value = getattr(holder, attribute)
        taken[name] = (holder, attribute, value, code_of(value))
    return taken


def changed(before: dict[str, tuple]) -> list[str]:
    """Names whose object (or the code inside it) is no longer the one seen before the
    candidate was imported."""
    out = []
    for name, (holder, attribute, original, code) in before.items():
        try:
            now = resolve(attribute) if holder is None else getattr(holder, attribute)
        except (AttributeError, ImportError):
            out.append(name)
            continue
        if now is not original or code_of(now) is not code:
            out.append(name)
    return out

