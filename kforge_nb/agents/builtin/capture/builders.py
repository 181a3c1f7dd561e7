"""The node builders of the builtin agent's `Lowerer`: the small methods the converters
(ops_*.py) call to add pointwise, reduce, scan, view, matmul and parameter nodes to the graph.
"""
from __future__ import annotations

import operator

import torch

from ..op_records import PROMOTING
from .errors import Unlowerable
from .fx_source import OPERATOR_SYMBOLS, attr_expr, resolve
from .ir import FLOAT, FLOATS, HALF, Node, broadcast, normalise_dims, reduced_shape
from .ops_matmul import diagonal_product, vector_product
from .positions import mark_count, mark_integers
from .value_names import sanitise


def product_dtype(tensors: list[Node], b: Node, out: torch.Tensor) -> torch.dtype:
    """The dtype a product's kernel stores: float32, or bf16 / fp16 where every operand and
    torch's result have it and B is one matrix (a Linear's weight, x @ W). Such a product is
    summed in float32 from the 16-bit values, the bias added in float32 and the sum rounded
    once at the store, as torch's bf16 / fp16 addmm does on the CPU and the GPU. A batched
    16-bit product (attention's q @ k^T) stays torch's."""
    if all(t.dtype == FLOAT for t in tensors):
        return FLOAT
    if out.dtype in HALF and all(t.dtype == out.dtype for t in tensors) and len(b.shape) == 2:
        return out.dtype
    raise Unlowerable("matmul on tensors that are not all float32, nor all one 16-bit "
                      "dtype with a 2-D B")


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
        if fn in PROMOTING and any(t.dtype in FLOATS for t in tensors):
            # a boolean or integer tensor beside a float one (x * mask): torch promotes it
            args = tuple(self.as_float(a) if a in tensors and a.dtype not in FLOATS else a
                         for a in args)
            tensors = [a for a in args if isinstance(a, Node) and a.is_tensor]
        if not tensors or any(t.dtype not in FLOATS for t in tensors):
            raise Unlowerable(f"{fn} on tensors that are not float32, bfloat16 or float16")
        # computed in float32; the Lowerer rounds the op's result to bf16 / fp16 where torch's
        # is one (`Lowerer.rounded_as_torch`)
        return self.add(mark_integers(Node(self.fresh(name or fn), "pointwise", fn, tuple(args),
                                           attrs, broadcast(*[t.shape for t in tensors]), FLOAT,
                                           self.label())))

    def reduce(self, kind: str, x, dims, keepdim: bool, name: str | None = None,
               correction: int = 0) -> Node:
        if kind == "sum" and isinstance(x, Node) and x.dtype == torch.bool:
            x = self.as_float(x)      # a count of a mask (positions.mark_count)
        if not isinstance(x, Node) or not x.is_tensor or x.dtype not in FLOATS or not x.shape:
            raise Unlowerable(f"{kind} of a tensor that is not float32, bfloat16 or float16")
        if isinstance(dims, Node):
            raise Unlowerable("reduction over a dimension computed at run time")
        dims = normalise_dims(dims, len(x.shape))
        if all(x.shape[d] == 1 for d in dims) and kind != "first_index" and not correction:
            return self.squeezed(x, dims, keepdim)     # one element each: nothing to reduce
        dtype = torch.int64 if kind == "first_index" else FLOAT
        return self.add(mark_count(Node(
            self.fresh(name or kind), "reduce", kind, (x,),
            {"dims": dims, "keepdim": bool(keepdim), "correction": correction},
            reduced_shape(x.shape, dims, keepdim), dtype, self.label())))

    def squeezed(self, x: Node, dims: tuple, keepdim: bool) -> Node:
        """x without its size-1 `dims` (a reduction over them): x itself when they are kept."""
        if keepdim or not dims:
            return x
        return self.view(x, reduced_shape(x.shape, dims, False), "{0}.squeeze(%r)" % (dims,),
                         [x], name=f"{x.name}_squeezed")

    def scan(self, kind: str, x, dim: int, reverse: bool = False,
             exclusive: bool = False) -> Node:
        """A running sum or product along one dim (cumsum, cumprod): same shape as x.
        `reverse` runs it from the last element to the first (a flipped cumsum flipped back);
        `exclusive` leaves the element itself out (a sum: 0 first)."""
        if not isinstance(x, Node) or not x.is_tensor or x.dtype != FLOAT or not x.shape:
            raise Unlowerable(f"cumulative {kind} of a non-float32 tensor")
        dims = normalise_dims(dim, len(x.shape))
        if x.shape[dims[0]] == 1 and not exclusive:
            return x
        return self.add(Node(self.fresh(f"cum{kind}"), "scan", kind, (x,),
                             {"dims": dims, "reverse": reverse, "exclusive": exclusive},
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

    def matmul(self, kind: str, a, b, bias, shape: tuple | None = None) -> Node:
        """A matrix product; `shape` when it is not the fx node's own value (a reshaped
        einsum)."""
        if bias is None and shape is None and kind in ("matmul", "mm"):
            scaled = diagonal_product(self, a, b)
            if scaled is None:
                scaled = vector_product(self, a, b)
            if scaled is not None:
                return scaled
        out = self.values.get(self.fx)
        tensors = [t for t in (a, b, bias) if t is not None]
        if not isinstance(out, torch.Tensor) or not all(isinstance(t, Node) for t in tensors):
            raise Unlowerable("matmul of something that is not a tensor")
        dtype = product_dtype(tensors, b, out)
        args = (a, b) if bias is None else (a, b, bias)
        name = self.fresh(self.base_name() if shape is None else f"{self.base_name()}_product")
        return self.add(Node(name, "matmul", kind, args, {},
                             tuple(out.shape) if shape is None else tuple(shape), dtype,
                             self.label()))

    def as_float(self, x: Node, name: str | None = None) -> Node:
        """An integer or boolean tensor (class indices, a mask) as float32, for the kernels."""
        if not isinstance(x, Node) or not x.is_tensor:
            raise Unlowerable("not a tensor")
        if x.dtype == FLOAT:
            return x
        return self.add(Node(self.fresh(name or f"{x.name}_float"), "host", "view", (x,),
                             {"expr": "{0}.to(torch.float32)", "boolean": x.dtype == torch.bool},
                             x.shape, FLOAT, self.label()))

    def iota(self, like: Node, dim: int, rank: int) -> Node:
        """0, 1, 2, ... along `dim` of `like`, shaped to broadcast at that dim of a tensor of
        `rank` dims: the index an elementwise mask compares (a class, a row, a column). It
        reads the size off `like` where `like` is ready before any kernel runs, else off the
        captured shape."""
        size, device = like.shape[dim], like
        if like.op not in ("input", "param", "matmul"):
            device = next((n for n in self.nodes if n.op == "input" and n.is_tensor), None)
            if device is None:
                raise Unlowerable("no tensor to place an index on")
        count = "{0}.shape[%d]" % dim if device is like else str(size)
        trailing = rank - 1 - (dim % rank)
        shape = (size,) + (1,) * trailing
        expr = f"torch.arange({count}, device={{0}}.device, dtype=torch.float32)"
        if trailing:
            expr += ".view(-1" + ", 1" * trailing + ")"
        return self.add(Node(self.fresh(f"{like.name}_index{dim}"), "host", "view", (device,),
                             {"expr": expr}, shape, FLOAT, self.label()))

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
