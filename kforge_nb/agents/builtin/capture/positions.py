"""Integer positions and boolean masks in the builtin agent's kernels.

`torch.arange(seq)` and what a module computes from it (`i[:, None] - i[None, :]`, compared
with a window, the masks joined with `|`, `&` and `~`, then given to masked_fill or where)
become kernel work. The kernels carry every value as float32, and float32 holds each whole
number of magnitude up to 2**24 exactly, so a node whose values are whole numbers records
their range (`attrs["integers"]`) and a step that could leave the exact range stays in torch:
within it, float32 arithmetic on these values is torch's int64 arithmetic, bit for bit.

Ranges come from the captured shapes (the capture is static). A count of a mask (`mask.sum()`)
is such a value too; where forward returns one, the kernel stores it as torch's int64
(op_records.mark_bool_outputs).
"""
from __future__ import annotations

import math

import torch

from ..op_records import BOOLEAN
from .errors import Unlowerable
from .fx_source import literal
from .ir import FLOAT, Node

EXACT = 2 ** 24     # float32's 24-bit significand: every integer up to here is exact

# ops whose result is a whole number when every operand is one (the rest: float32, as torch
# promotes an integer tensor meeting them, or a bool for comparisons)
CLOSED = {"add", "sub", "mul", "neg", "abs", "maximum", "minimum", "where"}


def is_boolean(x) -> bool:
    """A bool tensor, a comparison's 1 / 0, or a Python bool."""
    if isinstance(x, bool):
        return True
    return isinstance(x, Node) and x.is_tensor and (
        x.dtype == torch.bool or x.attrs.get("boolean", False) or
        (x.op == "pointwise" and x.fn in BOOLEAN))


def value_range(x) -> tuple[int, int] | None:
    """The whole numbers x takes, (low, high), or None when x is not known to be whole."""
    if is_boolean(x):
        return 0, 1
    if isinstance(x, int):
        return x, x
    if isinstance(x, Node):
        return x.attrs.get("integers")
    return None


def exact(low: int, high: int) -> tuple[int, int]:
    if max(abs(low), abs(high)) > EXACT:
        raise Unlowerable(f"whole numbers up to {max(abs(low), abs(high))} leave float32's "
                          "exact range")
    return low, high


def result_range(fn: str, args: tuple) -> tuple[int, int] | None:
    """The range of a pointwise op's result when torch's is an integer tensor computed from
    positions (Unlowerable where float32 could not hold it exactly), else None: a float32
    result (torch promotes the positions too), or an op on masks alone (bool in torch, 1 / 0
    here)."""
    tensors = [a for a in args if isinstance(a, Node) and a.is_tensor]
    positions = [t for t in tensors if t.attrs.get("integers")]
    whole = any(isinstance(a, int) and not isinstance(a, bool) for a in args)
    if not positions and not (whole and tensors and all(is_boolean(t) for t in tensors)):
        return None
    for a in args:
        if isinstance(a, (int, float)) and abs(a) > EXACT:
            raise Unlowerable(f"{a} is not exact in float32")
    if fn == "pow":
        raise Unlowerable("a power of positions")
    ranges = [value_range(a) for a in (args[1:] if fn == "where" else args)]
    if fn not in CLOSED or None in ranges:
        return None
    lows, highs = [r[0] for r in ranges], [r[1] for r in ranges]
    if fn == "add":
        return exact(sum(lows), sum(highs))
    if fn == "sub":
        return exact(lows[0] - highs[1], highs[0] - lows[1])
    if fn == "mul":
        corners = [a * b for a in ranges[0] for b in ranges[1]]
        return exact(min(corners), max(corners))
    if fn == "neg":
        return exact(-highs[0], -lows[0])
    if fn == "abs":
        low = 0 if lows[0] <= 0 <= highs[0] else min(abs(lows[0]), abs(highs[0]))
        return exact(low, max(abs(lows[0]), abs(highs[0])))
    return exact(min(lows), max(highs))        # maximum, minimum, where: one of the operands


def mark_integers(node: Node) -> Node:
    """Record the whole-number range of a new pointwise node (Builders.pw)."""
    found = result_range(node.fn, node.args)
    if found is not None:
        node.attrs["integers"] = found
    return node


def mark_count(node: Node) -> Node:
    """A sum of whole numbers (a mask's count, torch's int64): its range, exact in float32
    when every partial sum is (Builders.reduce)."""
    x = node.args[0]
    found = value_range(x) if node.fn == "sum" else None
    if found is not None:
        terms = math.prod(x.shape[d] for d in node.attrs["dims"])
        node.attrs["integers"] = exact(min(0, found[0] * terms), max(0, found[1] * terms))
    return node


# --- converters ---------------------------------------------------------------------------------

def c_arange(lw, a):
    """torch.arange of integers: the same positions as float32 whole numbers, made on the host
    like the triangle masks' index vectors (`Builders.iota`)."""
    value = lw.values.get(lw.fx)
    if not isinstance(value, torch.Tensor) or value.dtype != torch.int64 or value.dim() != 1:
        return None
    start, end, step = (0, a["start"], 1) if a["end"] is None else (a["start"], a["end"],
                                                                    a["step"])
    if not isinstance(start, int) or not isinstance(step, int):
        return None
    n = value.shape[0]
    low, high = sorted((start, start + step * max(n - 1, 0)))
    refs: list = []
    bounds = ", ".join(literal(v, refs) for v in (start, end, step))
    expr = f"torch.arange({bounds}, device={literal(a['device'], refs)}, dtype=torch.%s)"
    return lw.add(Node(lw.fresh(lw.base_name()), "host", "view", tuple(refs),
                       {"expr": expr % "float32", "int64_expr": expr % "int64",
                        "integers": exact(low, high)}, (n,), FLOAT, lw.label()))


ARANGE = (c_arange, "start, end=None, step=1, dtype=None, device=None, layout=None, "
                    "requires_grad=False, pin_memory=False")
LOGICAL = {"and": "logical_and", "or": "logical_or", "invert": "logical_not"}


def logical(lw, op: str, operands: list):
    """`a | b`, `a & b`, `~a` on masks: the logical op on 1 / 0; on whole numbers these are
    bitwise and stay in torch (None)."""
    if not all(is_boolean(x) for x in operands) or \
            not any(isinstance(x, Node) for x in operands):
        return None
    floats = [lw.as_float(x) if isinstance(x, Node) else x for x in operands]
    return lw.pw(LOGICAL[op], *floats)


def c_bitwise(op: str):
    def convert(lw, a):
        return logical(lw, op, [a["input"]] if op == "invert" else [a["input"], a["other"]])
    return convert, "input" if op == "invert" else "input, other"


def as_int64(lw, refs: list) -> None:
    """A torch op kept on positions (Keeper.keep) reads them as the reference does, int64."""
    for k, r in enumerate(refs):
        if r.is_tensor and r.dtype == FLOAT and r.attrs.get("integers"):
            refs[k] = int64_twin(lw, r)


def int64_twin(lw, r: Node) -> Node:
    """Positions as torch's int64: an arange and its views made again in int64 (a creation op
    and views, as the reference's own); positions a kernel computed, converted (exact)."""
    if r.op == "host" and r.fn == "view":
        args = tuple(int64_twin(lw, a) if isinstance(a, Node) and a.attrs.get("integers")
                     else a for a in r.args)
        attrs = {k: v for k, v in r.attrs.items() if k not in ("integers", "int64_expr")}
        attrs["expr"] = r.attrs.get("int64_expr", r.attrs["expr"])
    else:
        args, attrs = (r,), {"expr": "{0}.to(torch.int64)"}
    return lw.add(Node(lw.fresh(f"{r.name}_int64"), "host", "view", args, attrs, r.shape,
                       torch.int64, lw.label()))
