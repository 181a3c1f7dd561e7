"""Capture a KernelBench reference as the builtin agent's graph (ir.py).

The reference source is executed here, in the agent's process (the agent must see the module
to lower it), with the model and its inputs built on the `meta` device when that works, so
capturing a problem with multi-gigabyte weights costs nothing. `torch.fx.symbolic_trace`
records forward; an fx Interpreter run over the meta inputs gives every value's shape; each
fx node is then rewritten by the `Lowerer` (lowerer.py) with the converters of ops.py. What no
converter handles stays a `host` node: a torch call kept in ModelNew.forward, listed in
`Captured.kept`.
"""
from __future__ import annotations

import types
from dataclasses import dataclass, field

import torch
import torch.fx

from .errors import CaptureError
from .ir import Graph
from .lowerer import Lowerer


@dataclass
class Captured:
    graph: Graph
    model: torch.nn.Module
    namespace: types.ModuleType
    notes: list[str] = field(default_factory=list)
    kept: list[tuple[str, str | None]] = field(default_factory=list)   # (label, allow token)
    meta: bool = True


class Recorder(torch.fx.Interpreter):
    """Runs the traced module once and keeps every node's value (meta tensors: shapes only)."""

    def __init__(self, gm):
        super().__init__(gm)
        self.values = {}

    def run_node(self, n):
        value = super().run_node(n)
        self.values[n] = value
        return value


def build(source: str, meta: bool):
    namespace = types.ModuleType("kforge_builtin_reference")
    exec(compile(source, "<reference>", "exec"), namespace.__dict__)
    torch.manual_seed(0)
    init = list(namespace.get_init_inputs())
    if meta:
        with torch.device("meta"):
            model = namespace.Model(*init)
            inputs = list(namespace.get_inputs())
    else:
        model = namespace.Model(*init)
        inputs = list(namespace.get_inputs())
    return namespace, model, inputs


def capture(source: str) -> Captured:
    errors = []
    for meta in (True, False):
        try:
            namespace, model, inputs = build(source, meta)
            gm = torch.fx.symbolic_trace(model)
            recorder = Recorder(gm)
            with torch.no_grad():
                recorder.run(*inputs)
            break
        except Exception as exc:          # meta first; a real run when meta is not enough
            errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    else:
        raise CaptureError("torch.fx could not trace the reference (" + "; ".join(errors) + ")")
    lowerer = Lowerer(model, recorder.values)
    lowerer.gm = gm
    graph = lowerer.lower(gm)
    return Captured(graph, model, namespace, lowerer.notes, lowerer.kept, meta)


__all__ = ["capture", "Captured", "CaptureError"]
