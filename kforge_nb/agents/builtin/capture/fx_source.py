"""How fx targets and arguments read as Python source in ModelNew.forward: a target's
namespace and leaf name, an argument as a literal, a module path as a `self....` expression,
and the tensor methods and operators that read as views, sizes or symbols.
"""
from __future__ import annotations

import math
import operator

import torch

from .ir import Node

VIEW_METHODS = {"view", "reshape", "flatten", "unflatten", "unsqueeze", "squeeze", "view_as",
                "reshape_as"}
LAYOUT_METHODS = VIEW_METHODS | {"permute", "transpose", "t", "expand", "expand_as", "narrow",
                                 "movedim", "swapaxes", "select", "chunk", "split", "unbind"}
PYTHON_METHODS = {"size", "dim", "numel", "stride", "shape", "item", "tolist"}
OPERATOR_SYMBOLS = {operator.add: "+", operator.sub: "-", operator.mul: "*",
                    operator.truediv: "/", operator.floordiv: "//", operator.mod: "%",
                    operator.pow: "**", operator.matmul: "@", operator.eq: "==",
                    operator.ne: "!=", operator.lt: "<", operator.le: "<=", operator.gt: ">",
                    operator.ge: ">=", operator.and_: "&", operator.or_: "|"}


def attr_expr(path: str) -> str:
    """`self.layers[0].weight` for the dotted module path `layers.0.weight`."""
    out = "self"
    for part in path.split("."):
        out += f"[{part}]" if part.isdigit() else f".{part}"
    return out


def resolve(target) -> tuple[str, str]:
    """(namespace, leaf) of an fx call_function target: ('F', 'gelu'), ('torch', 'sum')."""
    try:
        name = torch.overrides.resolve_name(target) or ""
    except Exception:
        name = ""
    if not name:
        name = f"{getattr(target, '__module__', '') or ''}.{getattr(target, '__name__', '')}"
    for prefix, space in (("torch.nn.functional.", "F"), ("torch.Tensor.", "Tensor"),
                          ("torch.functional.", "torch"),
                          ("torch._C._nn.", "F"), ("torch._C._VariableFunctions.", "torch"),
                          ("torch.", "torch")):
        if name.startswith(prefix):
            return space, name[len(prefix):]
    return name.rpartition(".")[0], name.rpartition(".")[2]


def literal(value, refs: list) -> str:
    """Python source for an fx argument; Nodes become {i} placeholders collected in refs."""
    if isinstance(value, Node):
        refs.append(value)
        return "{%d}" % (len(refs) - 1)
    if isinstance(value, torch.Size):
        value = tuple(value)
    if isinstance(value, tuple):
        inner = ", ".join(literal(v, refs) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(literal(v, refs) for v in value) + "]"
    if isinstance(value, slice):
        parts = [literal(p, refs) if p is not None else "" for p in
                 (value.start, value.stop, value.step)]
        return ":".join(parts[:2]) + (f":{parts[2]}" if parts[2] else "")
    if value is Ellipsis:
        return "..."
    if isinstance(value, float) and not math.isfinite(value):
        return f"float('{value}')"
    if isinstance(value, (torch.dtype, torch.memory_format, torch.layout)):
        return str(value)
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    return repr(value).replace("{", "{{").replace("}", "}}")


def torch_calls(run) -> list[str]:
    """The names of the torch functions `run()` calls (recorded by a TorchFunctionMode)."""
    from torch.overrides import TorchFunctionMode
    names: list[str] = []

    class Record(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            names.append(getattr(func, "__name__", ""))
            return func(*args, **(kwargs or {}))
    with Record():
        run()
    return names
