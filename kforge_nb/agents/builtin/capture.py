"""Capture a KernelBench reference as the builtin agent's graph (ir.py).

The reference source is executed here, in the agent's process (the agent must see the module
to lower it), with the model and its inputs built on the `meta` device when that works, so
capturing a problem with multi-gigabyte weights costs nothing. `torch.fx.symbolic_trace`
records forward; an fx Interpreter run over the meta inputs gives every value's shape; each
fx node is then rewritten with the converters of ops.py. What no converter handles stays a
`host` node: a torch call kept in ModelNew.forward, listed in `Captured.kept`.
"""
from __future__ import annotations

import keyword
import math
import operator
import re
import types
from dataclasses import dataclass, field

import torch
import torch.fx

from . import ops
from .ir import FLOAT, Graph, Node, normalise_dims, reduced_shape, broadcast

# Names the emitters use for their own variables; values never take them.
RESERVED = {
    "row", "rows", "col", "cols", "lane", "lanes", "task", "tasks", "i", "n", "shape", "kernels",
    "source", "torch", "nn", "F", "math", "triton", "tl", "cpp", "self", "pid", "offsets", "mask",
    "start", "block", "begin", "end", "grid", "acc", "auto", "char", "const", "default", "delete",
    "double", "float", "int", "long", "new", "register", "short", "signed", "static", "struct",
    "switch", "this", "union", "unsigned", "void", "volatile", "case", "catch", "enum", "extern",
    "friend", "goto", "inline", "mutable", "namespace", "operator", "private", "protected",
    "public", "sizeof", "template", "throw", "typedef", "typename", "using", "virtual", "bool",
    "true", "false", "INFINITY", "NAN", "std", "vexp", "vlog", "vlog1p", "vtanh", "vsigmoid",
    "verf", "where", "LANE_BLOCK", "BLOCK_SIZE", "int64_t", "math_inline", "min", "max", "abs", "exp",
    "log", "sqrt", "erf", "tanh", "floor", "ceil", "sin", "cos", "pow", "fma", "out",
    "r", "j", "q", "l", "kk", "tile_row", "tile_col", "m_index", "n_index", "batch", "batches",
    "row_tiles", "col_tiles", "tiles", "rest", "slot", "elements", "reduce_count", "lane_begin",
    "lane_count", "lane_blocks", "program", "in_range", "product", "block", "panel", "part",
    "block_row", "row_blocks", "rows_here", "cols_here", "rows_in_tile", "k0", "k_here",
    "a_rows", "a_row", "a_batch", "a_value", "lanes_sum", "dot", "t", "m", "k",
}
VIEW_METHODS = {"view", "reshape", "flatten", "unflatten", "unsqueeze", "squeeze", "view_as",
                "reshape_as"}
LAYOUT_METHODS = VIEW_METHODS | {"permute", "transpose", "t", "expand", "expand_as", "narrow",
                                 "movedim", "swapaxes", "select", "chunk", "split", "unbind"}
PYTHON_METHODS = {"size", "dim", "numel", "stride", "shape", "item", "tolist"}
OPERATOR_SYMBOLS = {operator.add: "+", operator.sub: "-", operator.mul: "*",
                    operator.truediv: "/", operator.floordiv: "//", operator.mod: "%",
                    operator.pow: "**", operator.matmul: "@"}


class CaptureError(Exception):
    """The reference cannot be traced or run; the message says why."""


class Unlowerable(Exception):
    """A converter met something it cannot express; the op stays in torch."""


@dataclass
class Captured:
    graph: Graph
    model: torch.nn.Module
    namespace: types.ModuleType
    notes: list[str] = field(default_factory=list)
    kept: list[tuple[str, str | None]] = field(default_factory=list)   # (label, allow token)
    meta: bool = True


def sanitise(name: str) -> str:
    name = re.sub(r"\W", "_", name).strip("_") or "v"
    if name[0].isdigit():
        name = "v" + name
    if keyword.iskeyword(name) or name in RESERVED or name.startswith("n_"):
        name += "_v"
    return name


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


class Lowerer:
    """Rewrites fx nodes into ir.Nodes; converters in ops.py call its small builders."""

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

    # -- builders the converters use ------------------------------------------------------------
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
            result = self.try_convert(fx, args, kwargs)
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
            found = ops.module_call(module, fx.target, args[0] if args else None, self)
            return found[0](self, found[1]) if found else None
        if fx.op == "call_method":
            name = fx.target
            if name in ("to", "float", "type_as", "type") and self.same_dtype(fx, args[0]):
                return args[0]
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
        if target is getattr and isinstance(args[0], tuple) and args[1] in ("values", "indices"):
            return args[0][0 if args[1] == "values" else 1]
        if not any(isinstance(a, Node) and a.is_tensor for a in args) and \
                getattr(target, "__module__", None) == "math":
            return None                   # arithmetic on sizes: stays Python (keep)
        if target is torch.tensor and isinstance(args[0], (int, float)) and not kwargs:
            return float(args[0])
        if target in OPERATOR_SYMBOLS or target is operator.neg:
            name = target.__name__.strip("_")
            if not any(isinstance(a, Node) and a.is_tensor for a in args):
                return None
            if name == "matmul":
                return self.matmul("matmul", args[0], args[1], None)
            if name in ops.OPERATORS:
                return self.pw(ops.OPERATORS[name], *args)
            return None
        space, leaf = resolve(target)
        if space not in ("torch", "F", "Tensor"):
            return None
        if leaf in ops.RAW:
            return ops.RAW[leaf](self, args, kwargs)
        if leaf in ops.FUNCTIONS:
            convert, spec = ops.FUNCTIONS[leaf]
            return convert(self, ops.bind(args, kwargs, spec))
        return None

    def same_dtype(self, fx, x) -> bool:
        value = self.values.get(fx)
        return isinstance(x, Node) and isinstance(value, torch.Tensor) and value.dtype == x.dtype

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
        value = self.values.get(fx)
        is_tensor = isinstance(value, torch.Tensor)
        node = self.add(Node(self.fresh(fx.name), "host", kind, tuple(refs),
                             {"expr": expr, "reshape": reshape, "allow": allow, "label": label},
                             tuple(value.shape) if is_tensor else None,
                             value.dtype if is_tensor else None, self.label()))
        if label:
            self.kept.append((label, allow))
        return node

    def functions_called(self, module: torch.nn.Module, fx) -> list[str]:
        """The torch functions a kept submodule calls (Conv2d -> conv2d): the evaluator allows
        what they dispatch, and nothing else, in the candidate's forward."""
        from torch.overrides import TorchFunctionMode
        names: list[str] = []

        class Record(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                names.append(getattr(func, "__name__", ""))
                return func(*args, **(kwargs or {}))
        args = torch.fx.node.map_arg(fx.args, lambda n: self.values.get(n))
        kwargs = torch.fx.node.map_arg(fx.kwargs, lambda n: self.values.get(n))
        with Record(), torch.no_grad():
            module(*args, **kwargs)
        return sorted({n for n in names if n and not n.startswith("__")})

    def function_expr(self, target, args, kwargs, refs):
        """(expr, kind, allow token, label) for a call_function the agent keeps."""
        if target is operator.getitem:
            head = literal(args[0], refs)
            index = args[1] if isinstance(args[1], tuple) else (args[1],)
            inner = ", ".join(literal(i, refs) for i in index)
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
            return f"({left} {symbol} {right})", "kept" if tensor else "python", None, \
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


__all__ = ["capture", "Captured", "CaptureError"]
