"""How the builtin agent's `Lowerer` keeps an op it cannot lower: a `host` node whose
expression is the torch call, view or Python arithmetic as ModelNew.forward will write it, and
the torch functions the evaluator must then allow in the candidate's forward.
"""
from __future__ import annotations

import operator

import torch
import torch.fx

from .errors import CaptureError
from .fx_source import LAYOUT_METHODS, OPERATOR_SYMBOLS, PYTHON_METHODS, VIEW_METHODS, \
    attr_expr, literal, resolve, torch_calls
from .ir import Node
from .positions import as_int64


class Keeper:
    """Mixin of `Lowerer` (lowerer.py): the fallback for ops no converter handles."""

    def keep(self, fx: torch.fx.Node, args, kwargs) -> Node:
        """The op stays Python in forward: a view, a size, or a torch call the agent keeps."""
        refs: list[Node] = []
        call = lambda head, rest: f"{head}({', '.join(rest)})"
        tail = lambda first: [literal(a, refs) for a in args[first:]] + \
            [f"{k}={literal(v, refs)}" for k, v in kwargs.items()]
        kind, allow, label, reshape = "kept", None, None, False
        if fx.op == "call_module":
            module = self.model.get_submodule(fx.target)
            expr = call(attr_expr(fx.target), tail(0))
            label = f"{type(module).__name__} (self.{fx.target})"
            allow = ",".join(self.functions_called(module, fx))
        elif fx.op == "get_attr":
            expr, kind = attr_expr(fx.target), "python"
        elif fx.op == "call_method" or (fx.op == "call_function" and
                                        resolve(fx.target)[0] == "torch" and
                                        resolve(fx.target)[1] in LAYOUT_METHODS and
                                        self.is_tensor_node(args[0])):
            method = fx.target if fx.op == "call_method" else resolve(fx.target)[1]
            expr = call(f"{literal(args[0], refs)}.{method}", tail(1))
            if method in LAYOUT_METHODS | {"contiguous"}:
                kind, reshape = "view", method in VIEW_METHODS
            elif method in PYTHON_METHODS or not self.is_tensor_node(args[0]):
                kind = "python"
            else:
                label = allow = f"Tensor.{method}"
        else:
            expr, kind, allow, label = self.function_expr(fx.target, args, kwargs, refs)
        if kind == "kept":
            as_int64(self, refs)
        value = self.values.get(fx)
        is_tensor = isinstance(value, torch.Tensor)
        node = self.add(Node(self.fresh(fx.name), "host", kind, tuple(refs),
                             {"expr": expr, "reshape": reshape, "allow": allow, "label": label},
                             tuple(value.shape) if is_tensor else None,
                             value.dtype if is_tensor else None, self.label()))
        if kind == "view" and args and self.is_tensor_node(args[0]) and \
                "integers" in args[0].attrs:     # a view of positions (positions.py) stays one
            node.dtype, node.attrs["integers"] = args[0].dtype, args[0].attrs["integers"]
        if label:
            self.kept.append((label, allow))
        return node

    def functions_called(self, module: torch.nn.Module, fx) -> list[str]:
        """The torch functions a kept submodule calls (Conv2d -> conv2d): the evaluator allows
        what they dispatch, and nothing else, in the candidate's forward."""
        args = torch.fx.node.map_arg(fx.args, lambda n: self.values.get(n))
        kwargs = torch.fx.node.map_arg(fx.kwargs, lambda n: self.values.get(n))

        def run():
            with torch.no_grad():
                module(*args, **kwargs)
        names = torch_calls(run)
        return sorted({n for n in names if n and not n.startswith("__")})

    def function_expr(self, target, args, kwargs, refs):
        """(expr, kind, allow token, label) for a call_function the agent keeps."""
        if target is operator.getitem:
            head = literal(args[0], refs)
            index = args[1] if isinstance(args[1], tuple) else (args[1],)
            inner = ", ".join(literal(i, refs) for i in index)
            if any(self.is_tensor_node(i) for i in index):    # x[ids]: a gather, not a view
                return f"{head}[{inner}]", "kept", "index", "index"
            return f"{head}[{inner}]", "view" if self.is_tensor_node(args[0]) else "python", \
                None, None
        if target is getattr:
            return f"{literal(args[0], refs)}.{args[1]}", "python", None, None
        if target is operator.neg:
            tensor = self.is_tensor_node(args[0])
            return f"(-{literal(args[0], refs)})", "kept" if tensor else "python", None, \
                "neg" if tensor else None
        if target in OPERATOR_SYMBOLS:
            tensor = any(self.is_tensor_node(a) for a in args)
            symbol = OPERATOR_SYMBOLS[target]
            left, right = literal(args[0], refs), literal(args[1], refs)
            # a kept `@` is a vendor GEMM the candidate declares (torch.matmul); other symbols
            # on tensors name no allowance: the guardrail refuses them as torch compute
            allow = "matmul" if tensor and symbol == "@" else None
            return f"({left} {symbol} {right})", "kept" if tensor else "python", allow, \
                f"operator {symbol}" if tensor else None
        if getattr(target, "__module__", None) == "math":
            pieces = [literal(a, refs) for a in args]
            if target.__name__ == "sqrt":   # `math.sqrt(...)` reads as a tensor op to the rules
                return f"({pieces[0]} ** 0.5)", "python", None, None
            return f"math.{target.__name__}({', '.join(pieces)})", "python", None, None
        if target is getattr and isinstance(args[0], Node) and not args[0].is_tensor:
            return f"{literal(args[0], refs)}[{0 if args[1] == 'values' else 1}]", "view", \
                None, None
        space, leaf = resolve(target)
        if space not in ("torch", "F"):
            raise CaptureError(f"the reference calls {getattr(target, '__name__', target)!r}, "
                               "which the builtin agent can neither lower nor keep as a torch "
                               "call")
        pieces = [literal(a, refs) for a in args] + \
            [f"{k}={literal(v, refs)}" for k, v in kwargs.items()]
        return f"{space}.{leaf}({', '.join(pieces)})", "kept", leaf.rsplit(".", 1)[-1], leaf

    @staticmethod
    def is_tensor_node(value) -> bool:
        return isinstance(value, Node) and value.is_tensor
