"""The node builders of the builtin agent's `Lowerer`: the small methods the converters
(ops_*.py) call to add pointwise, reduce, scan, view, matmul and parameter nodes to the graph.
"""
from __future__ import annotations

import operator

import torch

from .errors import Unlowerable
from .fx_source import OPERATOR_SYMBOLS, attr_expr, resolve
from .ir import FLOAT, Node, broadcast, normalise_dims, reduced_shape
from .value_names import sanitise


class Builders:
    """Mixin of `Lowerer` (lowerer.py), which sets the state these methods read."""

    def fresh(self, base: str) -> str:
        name, k = sanitise(base), 2
        while name in self.names:
            name, k = f"{sanitise(base)}_{k}", k + 1
        self.names.add(name)
        return name

    def base_name(self) -> str:
        return sanitise(self.fx.name) if self.fx is not None else "v"

    def add(self, node: Node) -> Node:
        self.nodes.append(node)
        return node

    def pw(self, fn: str, *args, name: str | None = None, **attrs) -> Node:
        tensors = [a for a in args if isinstance(a, Node) and a.is_tensor]
        if not tensors or any(t.dtype != FLOAT for t in tensors):
            raise Unlowerable(f"{fn} on non-float32 tensors")
        return self.add(Node(self.fresh(name or fn), "pointwise", fn, tuple(args), attrs,
                             broadcast(*[t.shape for t in tensors]), FLOAT, self.label()))

    def reduce(self, kind: str, x, dims, keepdim: bool, name: str | None = None,
               correction: int = 0) -> Node:
        if not isinstance(x, Node) or not x.is_tensor or x.dtype != FLOAT or not x.shape:
            raise Unlowerable(f"{kind} of a non-float32 tensor")
        if isinstance(dims, Node):
            raise Unlowerable("reduction over a dimension computed at run time")
        dims = normalise_dims(dims, len(x.shape))
        dtype = torch.int64 if kind == "first_index" else FLOAT
        return self.add(Node(self.fresh(name or kind), "reduce", kind, (x,),
                             {"dims": dims, "keepdim": bool(keepdim), "correction": correction},
                             reduced_shape(x.shape, dims, keepdim), dtype, self.label()))

    def scan(self, kind: str, x, dim: int) -> Node:
        """A running reduction along one dim (cumsum): same shape as x."""
        if not isinstance(x, Node) or not x.is_tensor or x.dtype != FLOAT or not x.shape:
            raise Unlowerable(f"cumulative {kind} of a non-float32 tensor")
        dims = normalise_dims(dim, len(x.shape))
        return self.add(Node(self.fresh(f"cum{kind}"), "scan", kind, (x,), {"dims": dims},
                             x.shape, FLOAT, self.label()))

    def view(self, x: Node, shape: tuple, expr: str, args: list, name: str | None = None) -> Node:
        return self.add(Node(self.fresh(name or f"{x.name}_view"), "host", "view", tuple(args),
                             {"expr": expr, "reshape": True}, tuple(shape), x.dtype, self.label()))

    def channel_view(self, vector: Node, rank: int) -> Node:
        """A per-channel vector [C] viewed as [C, 1, ..., 1] so it broadcasts over N, C, ...."""
        if not isinstance(vector, Node):
            return vector
        ones = ", 1" * (rank - 2)
        return self.view(vector, tuple(vector.shape) + (1,) * (rank - 2),
                         "{0}.view(-1%s)" % ones, [vector], name=f"{vector.name}_per_channel")

    def matmul(self, kind: str, a, b, bias) -> Node:
        out = self.values.get(self.fx)
        tensors = [t for t in (a, b, bias) if t is not None]
        if not isinstance(out, torch.Tensor) or any(not isinstance(t, Node) or t.dtype != FLOAT
                                                    for t in tensors):
            raise Unlowerable("matmul on non-float32 tensors")
        args = (a, b) if bias is None else (a, b, bias)
        return self.add(Node(self.fresh(self.base_name()), "matmul", kind, args, {},
                             tuple(out.shape), FLOAT, self.label()))

    def param(self, path: str) -> Node | None:
        if path in self.params:
            return self.params[path]
        value = self.model
        for part in path.split("."):
            value = getattr(value, part)
        if value is None:
            return None
        if not isinstance(value, torch.Tensor):
            raise Unlowerable(f"self.{path} is not a tensor")
        node = self.add(Node(self.fresh(path.replace(".", "_")), "param", "", (),
                             {"expr": attr_expr(path), "path": path}, tuple(value.shape),
                             value.dtype, "parameter"))
        self.params[path] = node
        return node

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def only_first_item_used(self) -> bool:
        return all(u.op == "call_function" and ((u.target is operator.getitem and u.args[1] == 0)
                                                or (u.target is getattr and u.args[1] == "values"))
                   for u in self.fx.users)

    def label(self) -> str:
        if self.fx is None:
            return ""
        if self.fx.op == "call_module":
            return type(self.model.get_submodule(self.fx.target)).__name__
        if self.fx.op == "call_method":
            return str(self.fx.target)
        target = self.fx.target
        if target in OPERATOR_SYMBOLS or target is operator.neg:
            return target.__name__.strip("_")
        return resolve(target)[1]
