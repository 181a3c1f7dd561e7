"""The builtin agent's view of a reference: a flat list of small operations on named values.

The fx graph of the reference is rewritten into four kinds of node, which is all the later
stages need to know:

* `input` / `param`: tensors that exist before forward runs (arguments, `self.<path>` tensors);
* `pointwise`: one elementwise function (`fn`) of tensors and scalars, with torch broadcasting;
* `reduce`: a sum / mean / max / min over some dimensions (`attrs["dims"]`, `keepdim`);
* `matmul`: a matrix product (`linear`, `mm`, `bmm`, `matmul`), optionally with a bias;
* `template`: an op written as one whole kernel from its family's template (`fn`: conv, pool,
  attention; see ops_templates.py and templates/), `attrs["params"]` its settings;
* `host`: anything that stays Python in `ModelNew.forward` (views, sizes, torch ops the agent
  does not lower). `attrs["expr"]` is the Python expression with `{0}`, `{1}`... standing for
  the node's arguments.

Composite ops (softmax, layer_norm, group_norm, ...) arrive here already decomposed into
pointwise and reduce nodes (see `ops.py`), so fusion works on a handful of primitives.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

FLOAT = torch.float32
# Storage dtypes a kernel computes in float32 and rounds to after every op, as torch does: a
# value of one of these dtypes is loaded as float32 and rounded where its node is computed.
HALF = (torch.bfloat16, torch.float16)
FLOATS = (FLOAT,) + HALF


@dataclass(eq=False)
class Node:
    name: str
    op: str              # input | param | pointwise | reduce | matmul | template | host
    fn: str = ""                             # pointwise function, reduce kind or matmul kind
    args: tuple = ()                         # Nodes and Python constants
    attrs: dict = field(default_factory=dict)
    shape: tuple[int, ...] | None = None     # None: not a tensor (a Python number from sizes)
    dtype: torch.dtype | None = None
    origin: str = ""                         # the reference op it came from ("softmax", "relu")
    users: list["Node"] = field(default_factory=list)

    @property
    def is_tensor(self) -> bool:
        return self.shape is not None

    def tensor_args(self) -> list["Node"]:
        return [a for a in self.args if isinstance(a, Node) and a.is_tensor]

    def node_args(self) -> list["Node"]:
        return [a for a in self.args if isinstance(a, Node)]

    def __repr__(self) -> str:
        args = ", ".join(a.name if isinstance(a, Node) else repr(a) for a in self.args)
        return f"{self.name} = {self.op}:{self.fn}({args}) {list(self.shape or [])}"


@dataclass
class Graph:
    nodes: list[Node]
    inputs: list[Node]                       # forward arguments, in order
    outputs: list                            # Nodes (or constants) forward returns
    returns_tuple: bool = False
    kept: list[str] = field(default_factory=list)      # reference ops left to torch (labels)

    def link_users(self) -> None:
        for n in self.nodes:
            n.users = []
        for n in self.nodes:
            for a in n.node_args():
                if n not in a.users:
                    a.users.append(n)


def broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(torch.broadcast_shapes(*[torch.Size(s) for s in shapes]))


def reduced_shape(shape: tuple[int, ...], dims: tuple[int, ...], keepdim: bool) -> tuple[int, ...]:
    if keepdim:
        return tuple(1 if d in dims else s for d, s in enumerate(shape))
    return tuple(s for d, s in enumerate(shape) if d not in dims)


def normalise_dims(dims, rank: int) -> tuple[int, ...]:
    """`dim` as torch accepts it (int, list, None = all) -> sorted non-negative tuple."""
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return tuple(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return tuple(sorted({d % rank if rank else 0 for d in dims}))


def numel(shape) -> int:
    out = 1
    for s in shape:
        out *= s
    return out


TRANSPOSE = re.compile(r"^\{0\}\.(T|t\(\)|mT|transpose\((-2, -1|-1, -2|0, 1|1, 0|1, 2|2, 1)\))$")


def transposed_source(node: Node) -> Node | None:
    """x for a node that is x with its last two dims swapped (x.T, x.transpose(-2, -1), ...)."""
    if node.op == "host" and node.fn == "view" and TRANSPOSE.match(node.attrs.get("expr", "")):
        x = node.args[0]
        if len(x.shape) in (2, 3) and x.shape[:-2] == node.shape[:-2] and \
                x.shape[-2:] == node.shape[-2:][::-1]:
            if len(x.shape) == 2 or "0, 1" not in node.attrs["expr"]:
                return x
    return None
