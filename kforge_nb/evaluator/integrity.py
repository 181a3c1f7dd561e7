"""Detect a candidate that patches the functions a verdict or a timing could rest on.

The verdict itself is decided in the parent process, out of the candidate's reach, and the
worker's clocks are bound before the candidate is imported; this check turns an attempt into a
named `rejected` rule instead of letting it pass silently.
"""
from __future__ import annotations

import builtins
import importlib

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


def snapshot(extra: dict[str, tuple[object, str]] | None = None) -> dict[str, tuple]:
    """The guarded functions as they are now, plus `extra`: name -> (holder, attribute), e.g.
    the problem's get_inputs, which the candidate worker calls to draw each trial's inputs."""
    taken = {}
    for path in GUARDED:
        try:
            taken[path] = (None, path, resolve(path))
        except (AttributeError, ImportError):
            continue
    for name, (holder, attribute) in (extra or {}).items():
        taken[name] = (holder, attribute, getattr(holder, attribute))
    return taken


def changed(before: dict[str, tuple]) -> list[str]:
    """Names whose object is no longer the one seen before the candidate was imported."""
    out = []
    for name, (holder, attribute, original) in before.items():
        try:
            now = resolve(attribute) if holder is None else getattr(holder, attribute)
        except (AttributeError, ImportError):
            out.append(name)
            continue
        if now is not original:
            out.append(name)
    return out

