"""In-place writes in a traced reference: fx records `y.index_copy_(0, i, u)` or `s[..., 0] = v`
as a node whose result nobody reads, and the lowerer keeps only what the outputs read, so such a
write would vanish with everything that fed it. `first_write` names the first one, so that the
capture can hand the module to torch.export (export.py), whose functionalisation turns each
write into a new value that later reads see.
"""
from __future__ import annotations

import operator

import torch
import torch.fx

from .errors import CaptureError
from .fx_source import resolve, torch_calls


def op_name(fx: torch.fx.Node) -> str:
    """How the reference wrote the op: `Tensor.add_`, `torch.relu_`, `item assignment`."""
    if fx.op == "call_module":
        return f"self.{fx.target}"
    if fx.op == "call_method":
        return f"Tensor.{fx.target}"
    if fx.target is operator.setitem:
        return "item assignment"
    space, leaf = resolve(fx.target)
    return f"{space}.{leaf}" if space else leaf


def writes_in_place(fx: torch.fx.Node) -> bool:
    """A method or function named with a trailing `_` (add_, index_copy_, copy_), or setitem."""
    if fx.op == "call_method":
        name = fx.target
    elif fx.op == "call_function":
        if fx.target is operator.setitem:
            return True
        space, name = resolve(fx.target)
        if space in ("_operator", "operator"):     # and_, or_: `a & b`; `&=` is operator.iand
            return False
    else:
        return False
    return name.endswith("_") and not name.endswith("__")


def inplace_flag(gm: torch.fx.GraphModule, fx: torch.fx.Node) -> bool:
    """F.relu(x, inplace=True) or a call of nn.ReLU(inplace=True)."""
    if fx.op == "call_module":
        return getattr(gm.get_submodule(fx.target), "inplace", False) is True
    return fx.kwargs.get("inplace") is True


def overwritten_later(gm: torch.fx.GraphModule, fx: torch.fx.Node) -> bool:
    """An op run in place whose input is still read after it: the read must see the new
    values, which the lowerer (treating the op as out of place) would not give it."""
    if not inplace_flag(gm, fx) or not fx.args:
        return False
    target = fx.args[0]
    if not isinstance(target, torch.fx.Node):
        return False
    order = {n: k for k, n in enumerate(fx.graph.nodes)}
    return any(order[user] > order[fx] for user in target.users if user is not fx)


def first_write(gm: torch.fx.GraphModule) -> str | None:
    """The name of the first in-place write in the traced graph, or None when it has none."""
    for fx in gm.graph.nodes:
        if writes_in_place(fx):
            return op_name(fx)
        if overwritten_later(gm, fx):
            return f"{op_name(fx)} (inplace=True)"
    return None


def state_versions(model: torch.nn.Module) -> dict[str, int]:
    """Each parameter's and buffer's version counter: torch bumps it on every in-place write."""
    return {name: t._version for name, t in [*model.named_parameters(), *model.named_buffers()]}


def refuse_state_writes(model: torch.nn.Module, inputs: list, before: dict[str, int]) -> None:
    """fx runs `self.buf.add_(1)` eagerly while tracing (a buffer is no proxy) and records
    nothing: the version counters are what shows it. State kept between calls is refused."""
    written = sorted(name for name, version in state_versions(model).items()
                     if version != before.get(name, version))
    if not written:
        return
    with torch.no_grad():
        ops = [n for n in torch_calls(lambda: model(*inputs))
               if n.endswith("_") and not n.endswith("__")]
    raise state_refusal(written, f"Tensor.{ops[0]}" if ops else "")


def state_refusal(names, op: str = "") -> CaptureError:
    where = ", ".join(f"self.{name}" for name in sorted(set(names)))
    return CaptureError(f"the reference updates {where} in place{' with ' + op if op else ''}: "
                        "state kept between calls, which a candidate's kernels cannot reproduce")
