"""Detect a candidate that patches the functions a verdict or a timing could rest on.

The verdict itself is decided in the parent process, out of the candidate's reach; this check
turns an attempt into a named `rejected` rule instead of letting it pass silently. It covers
torch's and Python's clocks and comparisons, every function and class of kforge's own worker
modules (the harness's timer, the writer of the outputs, the fingerprint, the audit) and every
table they read (the audit's harmless ops and Triton's code, the tolerances, the limits):
rebinding one, swapping a function's code object in place, or editing a table's contents is
tampering. A module's LIVE_STATE names the containers it changes itself as it runs (the
audit's launch counts): those are checked for rebinding only.
"""
from __future__ import annotations

import builtins
import importlib
import sys
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
# (their names under kforge_nb.evaluator)
OWN_MODULES = ("worker.harness", "worker.audit", "worker.entry", "worker.common", "worker.judge",
               "worker.candidate", "worker.correctness", "worker.integrity", "worker.policy",
               "worker.nsight", "worker.op_costs", "worker.trial_values", "wire.transfer",
               "wire.framing", "wire.messages")


def own_modules() -> list[types.ModuleType]:
    return [m for name in OWN_MODULES
            if (m := sys.modules.get(f"kforge_nb.evaluator.{name}")) is not None]


def own_functions() -> dict[str, tuple[object, str]]:
    """name -> (module, attribute) for every function and class of kforge's worker modules."""
    out = {}
    for module in own_modules():
        for attribute, value in list(vars(module).items()):
            if (callable(value) or isinstance(value, types.ModuleType)) and \
                    not attribute.startswith("__"):     # functions, classes, imported modules
                out[f"{module.__name__}.{attribute}"] = (module, attribute)
            if isinstance(value, type) and value.__module__ == module.__name__:
                for method, member in list(vars(value).items()):
                    if callable(getattr(member, "__func__", member)) and \
                            not (method.startswith("__") and method != "__init__"):
                        out[f"{module.__name__}.{attribute}.{method}"] = (value, method)
    return out


def own_tables() -> dict[str, tuple[object, str]]:
    """name -> (module, attribute) for the data of kforge's worker modules: everything at
    module level that is not a function, a class or a module."""
    return {f"{module.__name__}.{attribute}": (module, attribute)
            for module in own_modules() for attribute, value in list(vars(module).items())
            if not (callable(value) or isinstance(value, types.ModuleType) or
                    attribute.startswith("__"))}


def code_of(value):
    return getattr(getattr(value, "__func__", value), "__code__", None)


def current(holder, attribute: str):
    """What `holder.attribute` is bound to: for a class, the member itself (a classmethod's
    getattr makes a new bound method every time)."""
    if isinstance(holder, type):
        try:
            return vars(holder)[attribute]
        except KeyError:
            raise AttributeError(attribute) from None
    return getattr(holder, attribute)


CONTAINERS = (set, list, tuple, dict)    # frozensets cannot change: rebinding is all there is


def frozen(value):
    """A container's contents as a value that later edits of it cannot change."""
    if isinstance(value, dict):
        return tuple((key, frozen(item)) for key, item in value.items())
    if isinstance(value, (set, frozenset)):
        return frozenset(value)
    if isinstance(value, (list, tuple)):
        return tuple(frozen(item) for item in value)
    return value


def snapshot(extra: dict[str, tuple[object, str]] | None = None) -> dict[str, tuple]:
    """The guarded functions and tables as they are now, plus `extra`: name -> (holder,
    attribute), e.g. the problem's get_inputs, which the candidate worker calls to draw each
    trial's inputs. Entries are (holder, attribute, object, its code, its contents)."""
    taken = {}
    for path in GUARDED:
        try:
            value = resolve(path)
        except (AttributeError, ImportError):
            continue
        taken[path] = (None, path, value, code_of(value), None)
    for name, (holder, attribute) in {**own_functions(), **(extra or {})}.items():
        value = current(holder, attribute)
        taken[name] = (holder, attribute, value, code_of(value), None)
    for name, (module, attribute) in own_tables().items():
        value = getattr(module, attribute)
        live = attribute in getattr(module, "LIVE_STATE", ())
        contents = frozen(value) if isinstance(value, CONTAINERS) and not live else None
        taken[name] = (module, attribute, value, None, contents)
    return taken


def changed(before: dict[str, tuple]) -> list[str]:
    """Names whose object (or the code inside it, or a table's contents) is no longer the
    one seen before the candidate was imported."""
    out = []
    for name, (holder, attribute, original, code, contents) in before.items():
        try:
            now = resolve(attribute) if holder is None else current(holder, attribute)
        except (AttributeError, ImportError):
            out.append(name)
            continue
        if now is not original or code_of(now) is not code or \
                (contents is not None and frozen(now) != contents):
            out.append(name)
    return out
