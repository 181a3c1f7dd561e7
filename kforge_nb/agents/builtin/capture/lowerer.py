"""The builtin agent's `Lowerer`: walks a traced fx graph and rewrites each fx node into ir.Nodes
with the converters of ops.py, keeping as a torch call (keep.py) what none handles.
"""
from __future__ import annotations

import operator
import re

import torch
import torch.fx

from . import ops, ops_index, ops_templates, positions
from ..op_records import CAST
from .errors import Unlowerable
from .fx_source import OPERATOR_SYMBOLS, resolve
from .ir import FLOAT, FLOATS, HALF, Graph, Node
from .builders import Builders
from .keep import Keeper


# Tensor methods that convert a tensor's dtype (x.to(torch.bfloat16), x.float(), x.type_as(y))
CASTS = ("to", "float", "half", "bfloat16", "type_as", "type")


class Lowerer(Builders, Keeper):
    """Rewrites fx nodes into ir.Nodes; the converters (ops.py) call its small builders."""

    def __init__(self, model: torch.nn.Module, values: dict):
        self.model, self.values = model, values
        self.nodes: list[Node] = []
        self.names: set[str] = set()
        self.params: dict[str, Node] = {}
        self.notes: list[str] = []
        self.kept: list[tuple[str, str | None]] = []
        self.fx: torch.fx.Node | None = None
        self.env: dict = {}
        self.gm: torch.fx.GraphModule | None = None

    # -- the walk -----------------------------------------------------------------------------
    def lower(self, gm: torch.fx.GraphModule) -> Graph:
        inputs, outputs, returns_tuple = [], [], False
        for fx in gm.graph.nodes:
            self.fx = fx
            if fx.op == "placeholder":
                value = self.values.get(fx)
                node = self.add(Node(self.fresh(fx.name), "input", "", (), {},
                                     tuple(value.shape) if isinstance(value, torch.Tensor) else None,
                                     value.dtype if isinstance(value, torch.Tensor) else None))
                inputs.append(node)
                self.env[fx] = node
            elif fx.op == "output":
                result = self.map(fx.args[0])
                returns_tuple = isinstance(result, (tuple, list))
                outputs = list(result) if returns_tuple else [result]
            else:
                self.env[fx] = self.convert(fx)
        self.fx = None
        graph = Graph(self.live(outputs), inputs, outputs, returns_tuple,
                      [label for label, _ in self.kept])
        graph.link_users()
        return graph

    def live(self, outputs: list) -> list[Node]:
        alive, todo = set(), [o for o in outputs if isinstance(o, Node)]
        while todo:
            n = todo.pop()
            if n not in alive:
                alive.add(n)
                todo.extend(n.node_args())
        return [n for n in self.nodes if n in alive or n.op == "input"]

    def map(self, value):
        if isinstance(value, torch.fx.Node):
            return self.env[value]
        if isinstance(value, (tuple, list)):
            return type(value)(self.map(v) for v in value)
        if isinstance(value, dict):
            return {k: self.map(v) for k, v in value.items()}
        if isinstance(value, slice):
            return slice(self.map(value.start), self.map(value.stop), self.map(value.step))
        return value

    def convert(self, fx: torch.fx.Node):
        args, kwargs = self.map(fx.args), self.map(fx.kwargs)
        mark, names = len(self.nodes), set(self.names)
        try:
            result = self.rounded_as_torch(fx, self.try_convert(fx, args, kwargs), mark)
        except (Unlowerable, TypeError, ValueError, KeyError, IndexError, AttributeError):
            result = None
        if result is None:
            del self.nodes[mark:]
            self.names = names
            return self.keep(fx, args, kwargs)
        if isinstance(result, Node) and result in self.nodes[mark:]:
            self.names.discard(result.name)
            result.name = self.fresh(fx.name)
        return result

    def rounded_as_torch(self, fx, result, mark: int):
        """torch computes a bf16 / fp16 op in float32 and rounds its result to the storage
        dtype, once per op: the node that is the op's result carries that dtype (the kernels
        round where they compute it; a reduction's result through a cast after it); the
        nodes an op is built from (a softmax's exp and sum, an add's `alpha *`) stay float32,
        as inside torch's one kernel."""
        value, made = self.values.get(fx), self.nodes[mark:]
        if isinstance(result, tuple) and isinstance(value, (tuple, list)):    # max(x, dim)
            return tuple(self.in_torch_dtype(r, v) if isinstance(r, Node) and r in made else r
                         for r, v in zip(result, value))
        return self.in_torch_dtype(result, value) if isinstance(result, Node) and result in made \
            else result

    def in_torch_dtype(self, result: Node, value) -> Node:
        if not isinstance(value, torch.Tensor) or value.dtype not in HALF or \
                result.dtype != FLOAT:
            return result
        if result.op == "reduce":
            result = self.pw(CAST, result)
        if result.op != "pointwise":
            raise Unlowerable(f"a {value.dtype} result the kernels would not round")
        result.dtype = value.dtype
        return result

    def try_convert(self, fx, args, kwargs):
        if fx.op == "get_attr":
            owner = self.model
            try:
                if re.fullmatch(r"_tensor_constant\d+", fx.target.split(".")[-1]):
                    raise AttributeError   # fx's own copy of a tensor built in forward
                for part in fx.target.split("."):
                    owner = getattr(owner, part)
            except AttributeError:     # a constant fx folded out of forward (torch.tensor(0.5))
                value = self.gm
                for part in fx.target.split("."):
                    value = getattr(value, part)
                if isinstance(value, torch.Tensor) and value.numel() == 1 and \
                        value.device.type != "meta":
                    return float(value.item())
                if isinstance(value, torch.Tensor) and value.device.type != "meta" and \
                        value.numel() <= 64:
                    return self.add(Node(self.fresh(fx.name), "host", "python", (),
                                         {"expr": f"torch.tensor({value.tolist()!r}, "
                                                  f"dtype={value.dtype})"},
                                         tuple(value.shape), value.dtype, "constant"))
                raise Unlowerable(f"constant {fx.target} cannot be written into the candidate")
            return self.param(fx.target) if isinstance(owner, torch.Tensor) else owner
        if fx.op == "call_module":
            module = self.model.get_submodule(fx.target)
            whole = ops_templates.module_call(module, fx.target, args[0] if args else None, self)
            if whole is not None:
                return whole
            found = ops.module_call(module, fx.target, args[0] if args else None, self)
            return found[0](self, found[1]) if found else None
        if fx.op == "call_method":
            name = fx.target
            if name in CASTS and self.same_dtype(fx, args[0]):
                return args[0]
            if name in CASTS and self.float_cast(fx, args[0]):
                return self.pw(CAST, args[0])   # rounded where it narrows (rounded_as_torch)
            if name in ops.RAW:
                return ops.RAW[name](self, args, kwargs)
            if name in ops.FUNCTIONS:
                convert, spec = ops.FUNCTIONS[name]
                return convert(self, ops.bind(args, kwargs, spec))
            return None
        # call_function
        target = fx.target
        if target is operator.getitem and isinstance(args[0], tuple):
            return args[0][args[1]]
        if target is operator.getitem and isinstance(args[0], Node):      # x[ids]: a gather
            return ops_index.c_getitem(self, args[0], args[1])
        if target is getattr and isinstance(args[0], tuple) and args[1] in ("values", "indices"):
            return args[0][0 if args[1] == "values" else 1]
        if not any(isinstance(a, Node) and a.is_tensor for a in args) and \
                getattr(target, "__module__", None) == "math":
            return None                   # arithmetic on sizes: stays Python (keep)
        if target is torch.tensor and isinstance(args[0], (int, float)) and not kwargs:
            return float(args[0])
        if target in (operator.and_, operator.or_, operator.invert):
            return positions.logical(self, target.__name__.strip("_"), list(args))
        if target in OPERATOR_SYMBOLS or target is operator.neg:
            name = target.__name__.strip("_")
            if not any(isinstance(a, Node) and a.is_tensor for a in args):
                return None
            if name == "matmul":
                return self.matmul("matmul", args[0], args[1], None)
            if name in ops_index.OPERATORS and ops_index.is_index(args[0]):   # ids // block
                return ops_index.fold_index_math(self, ops_index.OPERATORS[name], *args)
            if name in ops.OPERATORS:
                return self.pw(ops.OPERATORS[name], *args)
            return None
        space, leaf = resolve(target)
        if space not in ("torch", "F", "Tensor"):
            return None
        if leaf in ops.RAW:
            return ops.RAW[leaf](self, args, kwargs)
        if leaf in ops_templates.FUNCTIONS:
            convert, spec = ops_templates.FUNCTIONS[leaf]
            return convert(self, ops.bind(args, kwargs, spec))
        if leaf in ops.FUNCTIONS:
            convert, spec = ops.FUNCTIONS[leaf]
            return convert(self, ops.bind(args, kwargs, spec))
        return None

    def float_cast(self, fx, x) -> bool:
        """x.to(dtype) between float32, bf16 and fp16: a load, a rounding or a store in the
        kernel, not a copy in torch."""
        value = self.values.get(fx)
        return isinstance(x, Node) and x.is_tensor and x.dtype in FLOATS and \
            isinstance(value, torch.Tensor) and value.dtype in FLOATS and \
            tuple(value.shape) == tuple(x.shape)

    def same_dtype(self, fx, x) -> bool:
        value = self.values.get(fx)
        return isinstance(x, Node) and isinstance(value, torch.Tensor) and value.dtype == x.dtype
