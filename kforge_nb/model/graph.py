"""A whole model's forward as a list of parts: capture with torch.fx, split, write each part.

    trace (torch.fx, keeping the torch.nn layers it can rebuild as calls)
      -> group the call nodes in order: a part holds at most one heavy op (a GEMM, convolution,
         norm, softmax, pooling or reduction) with the pointwise and layout ops around it
      -> split a part wherever a value other than its last is used outside it, so that every
         part has exactly one output (its problem file returns one tensor)
      -> write each part as a KernelBench problem: `Model` rebuilds the layers the part calls
         (from their `extra_repr`, checked by rebuilding them here), owns the parameters it
         reads, and `get_inputs()` draws inputs of the real shapes and scale

Identical parts (same layers, code and input shapes; e.g. the blocks of a transformer) become
one problem used several times. This module runs in the decomposition's child process
(decompose_main.py): tracing executes the user's model.
"""
from __future__ import annotations

import operator
import re
from dataclasses import dataclass, field

import torch
import torch.fx
import torch.nn as nn

from ..compute_ops import GEMM, REDUCTION     # the heavy torch functions, by name

# --- what kind of op a node is ------------------------------------------------------------------

MODULE_KINDS = {
    "gemm": (nn.Linear, nn.Bilinear, nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d,
             nn.ConvTranspose2d, nn.ConvTranspose3d, nn.Embedding),
    "reduction": (nn.LayerNorm, nn.GroupNorm, nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d,
                  nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d, nn.Softmax,
                  nn.LogSoftmax, nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d, nn.AvgPool1d,
                  nn.AvgPool2d, nn.AvgPool3d, nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d,
                  nn.AdaptiveAvgPool3d, nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d,
                  nn.AdaptiveMaxPool3d, *([nn.RMSNorm] if hasattr(nn, "RMSNorm") else [])),
}
CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict)


class DecomposeError(ValueError):
    """The model cannot be split into part problems; the message says why and what to do."""


def op_name(node: torch.fx.Node, modules: dict) -> str:
    """A short name for what a node computes: `linear`, `gelu`, `add`, `view`."""
    if node.op == "call_module":
        return snake(type(modules[node.target]).__name__)
    if node.op == "call_method":
        return str(node.target)
    if node.op == "call_function":
        if node.target in OPERATOR_NAMES:
            return OPERATOR_NAMES[node.target]
        return getattr(node.target, "__name__", str(node.target)).lstrip("_")
    return node.op


OPERATOR_NAMES = {operator.add: "add", operator.sub: "sub", operator.mul: "mul",
                  operator.truediv: "div", operator.floordiv: "floordiv", operator.pow: "pow",
                  operator.matmul: "matmul", operator.neg: "neg", operator.getitem: "getitem",
                  operator.mod: "mod"}


def kind_of(node: torch.fx.Node, modules: dict) -> str:
    """`gemm`, `reduction` (both heavy: one per part) or `pointwise` (layout ops included)."""
    if node.op == "call_module":
        module = modules[node.target]
        return next((k for k, types in MODULE_KINDS.items() if isinstance(module, types)),
                    "pointwise")
    name = op_name(node, modules)
    if name in GEMM:
        return "gemm"
    # x.max() / x.sum(dim) are reductions; x.max(y) would be pointwise, but rare enough
    return "reduction" if name in REDUCTION else "pointwise"


def snake(name: str) -> str:
    """LayerNorm -> layer_norm, ReLU -> relu, LeakyReLU -> leaky_relu, RMSNorm -> rms_norm."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z][a-z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


# --- tracing ------------------------------------------------------------------------------------

def rebuild_expression(module: nn.Module) -> str | None:
    """`nn.Linear(in_features=4, ...)`: source that rebuilds a torch.nn layer (same class,
    same repr, same parameter shapes), or None when its repr does not say how."""
    cls = type(module)
    if not cls.__module__.startswith("torch.nn.modules") or isinstance(module, CONTAINERS) \
            or getattr(nn, cls.__name__, None) is not cls:
        return None
    text = f"nn.{cls.__name__}({module.extra_repr()})"
    try:
        with torch.device("meta"):
            copy = eval(text, {"nn": nn, "torch": torch})   # noqa: S307 - our own repr text
    except Exception:
        return None
    shapes = lambda m: {k: (tuple(v.shape), v.dtype) for k, v in m.state_dict().items()}  # noqa: E731
    if repr(copy) != repr(module) or shapes(copy) != shapes(module):
        return None
    return text + ("" if module.training else ".eval()")


class PartTracer(torch.fx.Tracer):
    """Keeps a torch.nn layer as one call when a part file can rebuild it; traces into the
    rest (the user's own modules, containers)."""

    def __init__(self):
        super().__init__()
        self.proxy_buffer_attributes = True     # `self.mask[:T, :T]` with T from x.size()
        self.rebuild: dict[str, str] = {}

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        expression = rebuild_expression(m)
        if expression is None:
            return False
        self.rebuild[qualname] = expression
        return True


def trace(model: nn.Module) -> tuple[torch.fx.GraphModule, dict[str, str]]:
    tracer = PartTracer()
    try:
        graph = tracer.trace(model)
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise DecomposeError(
            f"torch.fx could not trace the model ({type(exc).__name__}: {first}). Whole-model "
            "mode needs a forward without data-dependent Python control flow; optimise its "
            "modules one at a time with `kforge run` instead.") from None
    gm = torch.fx.GraphModule(model, graph)
    gm.graph.eliminate_dead_code()
    return gm, tracer.rebuild


# --- grouping -----------------------------------------------------------------------------------

@dataclass
class Group:
    nodes: list = field(default_factory=list)
    heavy: torch.fx.Node | None = None


@dataclass
class Info:
    """What a node's value looked like in the real run: enough to draw inputs like it."""
    tensor: bool
    shape: tuple = ()
    dtype: str = ""
    mean: float = 0.0
    std: float = 0.0
    low: float = 0.0
    high: float = 0.0

    @classmethod
    def of(cls, value) -> "Info":
        if not isinstance(value, torch.Tensor):
            return cls(False)
        info = cls(True, tuple(value.shape), str(value.dtype).replace("torch.", ""))
        if value.numel():
            v = value.detach()
            if v.is_floating_point():
                f = v.float()
                info.mean, info.std = f.mean().item(), f.std().item() if v.numel() > 1 else 0.0
            info.low, info.high = v.min().float().item(), v.max().float().item()
        return info


class Recorder(torch.fx.Interpreter):
    """Runs the traced model once and keeps an Info per node (not the values themselves)."""

    def __init__(self, gm):
        super().__init__(gm)
        self.infos: dict = {}

    def run_node(self, n):
        value = super().run_node(n)
        self.infos[n] = Info.of(value)
        return value


def is_tensor(info) -> bool:
    return info is not None and info.tensor


# views and sizes cost nothing: each part that reads one recomputes it from the tensor it views,
# so that `q, k, v = qkv.split(...)` followed by views never cuts a part in pieces
VIEWS = {"view", "reshape", "flatten", "unflatten", "permute", "transpose", "t", "unsqueeze",
         "squeeze", "expand", "expand_as", "view_as", "reshape_as", "getitem", "narrow", "select",
         "chunk", "split", "movedim", "swapaxes", "contiguous", "identity", "unbind"}


def recomputed(node: torch.fx.Node, infos: dict, modules: dict) -> bool:
    """Whether parts recompute this node instead of passing it: a size, a tuple, a view."""
    if node.op not in ("call_module", "call_function", "call_method"):
        return False
    return not is_tensor(infos.get(node)) or op_name(node, modules) in VIEWS


def group_nodes(gm: torch.fx.GraphModule, infos: dict) -> list[Group]:
    """Call nodes in order, a new group at each heavy op once the group has one. Sizes and
    views are left out (recomputed where used), except a view the model returns."""
    modules = dict(gm.named_modules())
    returned = set(next(n for n in gm.graph.nodes if n.op == "output").all_input_nodes)
    groups = [Group()]
    for node in gm.graph.nodes:
        if node.op not in ("call_module", "call_function", "call_method"):
            continue
        if recomputed(node, infos, modules) and not (node in returned and
                                                     is_tensor(infos.get(node))):
            continue
        heavy = kind_of(node, modules) != "pointwise"
        if heavy and groups[-1].heavy is not None:
            groups.append(Group())
        groups[-1].nodes.append(node)
        if heavy:
            groups[-1].heavy = node
    groups = [g for g in groups if g.nodes]
    done: list[Group] = []
    while len(done) != len(groups):      # a cut can expose another multi-output piece
        done = groups
        groups = split_multi_output(groups, infos, modules)
    return groups


def split_multi_output(groups: list[Group], infos: dict, modules: dict) -> list[Group]:
    """Cut each group after any node other than its last that is used outside the group."""
    out = []
    for group in groups:
        members = set(group.nodes)
        current = Group()
        for node in group.nodes:
            current.nodes.append(node)
            if node is group.heavy:
                current.heavy = node
            used_outside = any(needs(u, members, infos, modules) for u in node.users)
            if used_outside and node is not group.nodes[-1]:
                out.append(current)
                current = Group()
        if current.nodes:
            out.append(current)
    return out


def needs(user: torch.fx.Node, members: set, infos: dict, modules: dict) -> bool:
    """Whether `user` needs the value from outside `members`: a view or size recomputed inside
    the group does not, unless what uses it is outside."""
    if user.op == "output":
        return True
    if user in members:
        return False
    if recomputed(user, infos, modules):
        return any(needs(u, members, infos, modules) for u in user.users)
    return True
