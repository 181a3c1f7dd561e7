"""Gathers and scatters by integer index tensors: what a kv cache, a paged cache or an embedding
table does. Each becomes a `template` node (ir.py) of family `gather` or `scatter` that
templates/indexing.py writes as one kernel moving whole rows:

* gather: `x[ids]`, `x[:, ids]`, `x[blocks, offsets]`, `index_select`, `embedding`;
* scatter: `index_copy` and `index_put` (accumulate=False), the in-place forms arriving here
  functional from torch.export (mutations.py): the output is the destination with the rows
  written, the destination itself left as it was.

The indexed dims are a run `dim .. dim + len(positions) - 1` of the tensor; the rows are what
lies after them, moved as they are (bits, not values). Each indexed dim's position is a small
formula over integer index tensors (`slots // 16`, `slots % 16`): integer floor division and
remainder by a Python int are folded into the kernel, in torch's floor semantics, so the
integer arithmetic of a paged write runs where the indices are read.

`params` of the node: `dim`, `positions` (one formula per indexed dim: ("leaf", k) for the
k-th index tensor argument, ("floordiv" | "mod", formula, int)), `leaves` (how many index
tensors the node reads; all the same shape). A call outside this (a boolean mask, indices
that broadcast against each other, an int in the index, accumulate=True) stays in torch.
"""
from __future__ import annotations

import torch

from .ir import Node

INDEX_DTYPES = (torch.int64, torch.int32)
# Tensors whose elements are whole words: rows are moved as bits (complex would be two).
MOVABLE = {torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64,
           torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool}


# -- integer index arithmetic -------------------------------------------------------------------
def fold_index_math(lw, op: str, x, by) -> Node | None:
    """`ids // n` or `ids % n` on an integer tensor: kept as the torch call where it is used
    on its own, and remembered as a formula a gather or scatter folds into its kernel."""
    if not is_index(x) or isinstance(by, bool) or not isinstance(by, int) or by == 0:
        return None
    node = lw.keep(lw.fx, (x, by), {})
    node.attrs["index_math"] = (op, x, by)
    return node


def index_math(op: str, otherwise: tuple | None):
    """The converter of torch.floor_divide / torch.remainder: integer tensors folded here,
    anything else to the table's own converter of the name (`otherwise`), if it has one."""
    def convert(lw, a):
        if is_index(a["input"]):
            return fold_index_math(lw, op, a["input"], a["other"])
        return otherwise[0](lw, a) if otherwise else None
    return convert, otherwise[1] if otherwise else "input, other"


# `ids // n`, `ids % n` with Python's operators (integer tensors only: the caller checks)
OPERATORS = {"floordiv": "floordiv", "mod": "mod"}


def is_index(value) -> bool:
    return isinstance(value, Node) and value.is_tensor and value.dtype in INDEX_DTYPES


def formula(index: Node, leaves: list[Node]):
    """The formula computing `index` from integer tensors (added to `leaves` as met)."""
    math = index.attrs.get("index_math") if index.op == "host" else None
    if math is not None:
        op, inner, by = math
        return (op, formula(inner, leaves), by)
    if index not in leaves:
        leaves.append(index)
    return ("leaf", leaves.index(index))


def positions(indices: list[Node]) -> tuple[list, list[Node]] | None:
    """(one formula per indexed dim, the index tensors they read), or None where the indices
    are not integer tensors of one shape."""
    if not indices or not all(is_index(i) for i in indices):
        return None
    if len({tuple(i.shape) for i in indices}) != 1:
        return None                   # indices broadcast against each other: stays in torch
    leaves: list[Node] = []
    found = [formula(i, leaves) for i in indices]
    if len({tuple(leaf.shape) for leaf in leaves}) != 1:
        return None
    return found, leaves


# -- the nodes ----------------------------------------------------------------------------------
def indexed_node(lw, family: str, tensors: list[Node], dim: int, indices: list[Node],
                 vendor, call: str) -> Node | None:
    """The gather / scatter template node, or None (the call stays in torch). `vendor` writes
    torch's own call from the tensors' and the indices' expressions (the kept fallback)."""
    out = lw.values.get(lw.fx)
    found = positions(indices)
    if found is None or not isinstance(out, torch.Tensor) or out.dtype not in MOVABLE or \
            any(t.dtype != out.dtype for t in tensors):
        return None
    formulas, leaves = found
    args = tuple(tensors) + tuple(leaves)
    refs = {id(node): "{%d}" % k for k, node in enumerate(args)}
    params = {"dim": dim, "positions": formulas, "leaves": len(leaves),
              "shapes": [tuple(t.shape) for t in args]}
    written = vendor(*[refs[id(t)] for t in tensors], [torch_index(i, refs) for i in indices])
    return lw.add(Node(lw.fresh(lw.base_name()), "template", family, args,
                       {"params": params, "vendor": written, "allow": call, "label": call,
                        "call": call}, tuple(out.shape), out.dtype, call))


def torch_index(index: Node, refs: dict) -> str:
    """torch's spelling of an index formula over the leaves (the vendor call's argument)."""
    math = index.attrs.get("index_math") if index.op == "host" else None
    if math is None:
        return refs[id(index)]
    op, inner, by = math
    return f"({torch_index(inner, refs)} {'//' if op == 'floordiv' else '%'} {by})"


def run_of_indices(index: tuple, rank: int) -> tuple[int, list[Node]] | None:
    """(first indexed dim, the index tensors) of `x[index]` where the index is full slices,
    then one or more integer tensors, then full slices; None for anything else."""
    whole = lambda i: isinstance(i, slice) and i == slice(None)  # noqa: E731
    tensors = [k for k, i in enumerate(index) if isinstance(i, Node)]
    if not tensors or len(index) > rank or tensors != list(range(tensors[0], tensors[-1] + 1)):
        return None
    if not all(whole(i) for k, i in enumerate(index) if k not in tensors):
        return None
    return tensors[0], [index[k] for k in tensors]


def fits(shape: tuple, into: tuple) -> bool:
    """Whether values of `shape` broadcast to the rows they are written into."""
    try:
        return tuple(torch.broadcast_shapes(torch.Size(shape), torch.Size(into))) == tuple(into)
    except RuntimeError:
        return False


def subscript(dim: int, indices: list[str], empty: str) -> str:
    """`:, :, ids` (or `None, None, ids` for index_put's list): the run at `dim`."""
    return ", ".join([empty] * dim + indices)


def c_getitem(lw, x, index) -> Node | None:
    """`x[ids]`, `x[:, ids]`, `x[blocks, offsets]`: a gather."""
    index = index if isinstance(index, tuple) else (index,)
    if not isinstance(x, Node) or not x.is_tensor:
        return None
    run = run_of_indices(index, len(x.shape))
    if run is None:
        return None
    dim, indices = run
    return indexed_node(lw, "gather", [x], dim, indices,
                        lambda src, ids: f"{src}[{subscript(dim, ids, ':')}]", "index")


def c_index_select(lw, a):
    x, index = a["input"], a["index"]
    if not isinstance(x, Node) or not x.is_tensor or not is_index(index) or \
            len(index.shape) != 1:
        return None
    dim = a["dim"] % max(len(x.shape), 1)
    return indexed_node(lw, "gather", [x], dim, [index],
                        lambda src, ids: f"torch.index_select({src}, {dim}, {ids[0]})",
                        "index_select")


def c_embedding(lw, a):
    """F.embedding(ids, weight): rows of the table by id (max_norm renormalises: torch's)."""
    ids, weight = a["input"], a["weight"]
    if a["max_norm"] is not None or not isinstance(weight, Node) or weight.shape is None or \
            len(weight.shape) != 2:
        return None
    return indexed_node(lw, "gather", [weight], 0, [ids],
                        lambda table, i: f"F.embedding({i[0]}, {table})", "embedding")


def c_index_copy(lw, a):
    """out = x with out.select(dim, index[j]) = source.select(dim, j)."""
    x, index, source = a["input"], a["index"], a["source"]
    if not all(isinstance(t, Node) and t.is_tensor for t in (x, source)) or \
            not is_index(index) or len(index.shape) != 1 or len(source.shape) != len(x.shape):
        return None
    dim = a["dim"] % max(len(x.shape), 1)
    return indexed_node(lw, "scatter", [x, source], dim, [index],
                        lambda dst, src, ids: f"torch.index_copy({dst}, {dim}, {ids[0]}, {src})",
                        "index_copy")


def c_index_put(lw, a):
    """out = x with out[indices] = values (accumulate=False; accumulating stays in torch)."""
    x, indices, values = a["input"], a["indices"], a["values"]
    if a["accumulate"] or not all(isinstance(t, Node) and t.is_tensor for t in (x, values)) or \
            not isinstance(indices, (list, tuple)):
        return None
    run = run_of_indices(tuple(slice(None) if i is None else i for i in indices), len(x.shape))
    if run is None:
        return None
    dim, found = run
    if not fits(values.shape, x.shape[:dim] + found[0].shape + x.shape[dim + len(found):]):
        return None
    return indexed_node(lw, "scatter", [x, values], dim, found,
                        lambda dst, src, ids: f"torch.index_put({dst}, "
                                              f"[{subscript(dim, ids, 'None')}], {src})",
                        "index_put")


def functions(existing: dict) -> dict:
    """This module's converters for the table of ops.py (`existing`: floor_divide and
    remainder of floats stay with the converters it has for them)."""
    return {
        "floor_divide": index_math("floordiv", existing.get("floor_divide")),
        "remainder": index_math("mod", existing.get("remainder")),
        "index_select": (c_index_select, "input, dim, index"),
        "embedding": (c_embedding, "input, weight, padding_idx=None, max_norm=None, "
                                   "norm_type=2.0, scale_grad_by_freq=False, sparse=False"),
        "index_copy": (c_index_copy, "input, dim, index, source"),
        "index_put": (c_index_put, "input, indices, values, accumulate=False"),
    }
