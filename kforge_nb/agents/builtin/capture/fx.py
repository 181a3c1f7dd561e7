"""Capture a KernelBench reference as the builtin agent's graph (ir.py).

The reference source is executed here, in the agent's process (the agent must see the module
to lower it), with the model and its inputs built on the `meta` device when that works, so
capturing a problem with multi-gigabyte weights costs nothing. `torch.fx.symbolic_trace`
records forward; where it cannot, or where forward writes in place (a write fx would let the
lowerer drop), torch.export captures it on the example inputs instead (export.py, and the
note says so); an fx Interpreter run over the meta inputs gives every value's shape; each
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
from .export import export
from .ir import Graph
from .lowerer import Lowerer
from .mutations import first_write, refuse_state_writes, state_versions


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


def first_line(exc: Exception) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def trace(model: torch.nn.Module, inputs: list, rebuild) -> tuple:
    """(graph, the module it reads, the note saying why torch.export captured it, or None).

    fx symbolic tracing first (what every KernelBench problem was lowered from); torch.export
    where fx cannot trace forward, or where forward writes in place, which fx records as a node
    nobody reads (mutations.py). Export gets a module built afresh (`rebuild`): tracing may have
    left proxies in the first one's attributes (`self.hidden = ...` in forward)."""
    state = state_versions(model)
    try:
        gm = torch.fx.symbolic_trace(model)
        refuse_state_writes(model, inputs, state)
    except CaptureError:
        raise
    except Exception as exc:
        why, how = f"torch.fx could not trace the reference ({first_line(exc)})", ""
    else:
        write = first_write(gm)
        if write is None:
            return gm, model, None
        why, how = f"the reference writes in place ({write})", ", each write as a new value"
    try:
        model, inputs = rebuild()
        return export(model, inputs), model, \
            f"{why}: captured with torch.export on the example inputs{how}"
    except CaptureError as exc:
        raise CaptureError(f"{why}, and {exc}") from None
    except Exception as exc:
        raise CaptureError(f"{why}, and torch.export could not capture it either "
                           f"({first_line(exc)})") from None


def capture(source: str) -> Captured:
    errors = []
    for meta in (True, False):
        try:
            namespace, model, inputs = build(source, meta)
            gm, model, how = trace(model, inputs, lambda: build(source, meta)[1:])
            recorder = Recorder(gm)
            with torch.no_grad():
                recorder.run(*inputs)
            break
        except Exception as exc:          # meta first; a real run when meta is not enough
            errors.append(str(exc) if isinstance(exc, CaptureError) else
                          f"the reference could not be captured ({first_line(exc)})")
    else:
        raise CaptureError("; ".join(dict.fromkeys(errors)))      # each reason once
    lowerer = Lowerer(model, recorder.values)
    lowerer.gm = gm
    graph = lowerer.lower(gm)
    notes = ([how] if how else []) + lowerer.notes
    return Captured(graph, model, namespace, notes, lowerer.kept, meta)


__all__ = ["capture", "Captured", "CaptureError"]
