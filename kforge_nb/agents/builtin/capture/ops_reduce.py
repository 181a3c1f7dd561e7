"""Reduction converters for the builtin agent: sum / mean / max / min, var / std, softmax and
log_softmax, logsumexp, norms of a tensor, argmax / argmin, cumsum, and global average pooling.

Composite ops are decomposed in the order a student would write them by hand: softmax is max,
exp(x - max), sum, divide. A converter returns None when it cannot express a call.
"""
from __future__ import annotations

import re

import torch

from .ir import Node, normalise_dims

NARROW_FROM_0 = re.compile(r"^\{0\}\.narrow\((dim=)?-?\d+, (start=)?0, ")

def c_reduce(kind: str):
    def convert(lw, a):
        if a.get("dtype") not in (None, torch.float32):
            return None
        return lw.reduce(kind, a["input"], a["dim"], a["keepdim"])
    return convert, "input, dim=None, keepdim=False, dtype=None"


def c_var_std(kind: str):
    def convert(lw, args, kwargs):
        x = args[0]
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        correction = 1
        if len(args) > 2:
            correction = int(bool(args[2])) if isinstance(args[2], bool) else None
        if "unbiased" in kwargs:
            correction = int(bool(kwargs["unbiased"]))
        if "correction" in kwargs:
            correction = kwargs["correction"] if kwargs["correction"] is not None else 1
        keepdim = args[3] if len(args) > 3 else kwargs.get("keepdim", False)
        if isinstance(dim, bool) or correction is None:
            return None
        base = lw.base_name()
        mean = lw.reduce("mean", x, dim, True, name=f"{base}_mean")
        centred = lw.pw("sub", x, mean, name=f"{base}_centred")
        var = lw.reduce("mean", lw.pw("mul", centred, centred, name=f"{base}_squared"), dim,
                        keepdim, correction=correction, name=f"{base}_var" if kind == "std" else base)
        return lw.pw("sqrt", var) if kind == "std" else var
    return convert


def c_softmax(log: bool):
    def convert(lw, a):
        if a.get("dtype") not in (None, torch.float32) or a["dim"] is None:
            return None
        x, base = a["input"], lw.base_name()
        row_max = lw.reduce("max", x, a["dim"], True, name=f"{base}_max")
        shifted = lw.pw("sub", x, row_max, name=f"{base}_shifted")
        exps = lw.pw("exp", shifted, name=f"{base}_exp")
        total = lw.reduce("sum", exps, a["dim"], True, name=f"{base}_sum")
        if log:
            return lw.pw("sub", shifted, lw.pw("log", total, name=f"{base}_log_sum"))
        return lw.pw("div", exps, total)
    return convert, "input, dim=None, _stacklevel=3, dtype=None"


def c_logsumexp(lw, a):
    x, base = a["input"], lw.base_name()
    dims = normalise_dims(a["dim"], len(x.shape))
    if all(x.shape[d] == 1 for d in dims):       # one element: the log of its exp is itself
        return lw.squeezed(x, dims, a["keepdim"])
    row_max = lw.reduce("max", x, a["dim"], True, name=f"{base}_max")
    exps = lw.pw("exp", lw.pw("sub", x, row_max, name=f"{base}_shifted"), name=f"{base}_exp")
    total = lw.reduce("sum", exps, a["dim"], True, name=f"{base}_sum")
    out = lw.pw("add", lw.pw("log", total, name=f"{base}_log_sum"), row_max,
                name=base if a["keepdim"] else f"{base}_keep")
    if a["keepdim"]:
        return out
    dims = normalise_dims(a["dim"], len(x.shape))
    return lw.view(out, tuple(s for d, s in enumerate(out.shape) if d not in dims),
                   "{0}.squeeze(%r)" % (dims,), [out])


def c_norm(lw, a):
    x, p, base = a["input"], a["p"], lw.base_name()
    if p not in ("fro", 2, 2.0, None) or a.get("dtype") is not None:
        return None
    total = lw.reduce("sum", lw.pw("mul", x, x, name=f"{base}_squared"), a["dim"], a["keepdim"],
                      name=f"{base}_sum_squares")
    return lw.pw("sqrt", total)


def c_vector_norm(lw, a):
    x, order, base = a["input"], a["ord"], lw.base_name()
    if a.get("dtype") is not None:
        return None
    if order in (2, 2.0):
        total = lw.reduce("sum", lw.pw("mul", x, x, name=f"{base}_squared"), a["dim"],
                          a["keepdim"], name=f"{base}_sum_squares")
        return lw.pw("sqrt", total)
    if order in (1, 1.0):
        return lw.reduce("sum", lw.pw("abs", x, name=f"{base}_abs"), a["dim"], a["keepdim"])
    if order == float("inf"):
        return lw.reduce("max", lw.pw("abs", x, name=f"{base}_abs"), a["dim"], a["keepdim"])
    return None


def c_adaptive_avg_pool(lw, a):
    """Adaptive average pooling to a single value per channel is a mean over the spatial dims."""
    x, size = a["input"], a["output_size"]
    sizes = size if isinstance(size, (tuple, list)) else (size,)
    if any(s != 1 for s in sizes):
        return None
    rank = len(x.shape)
    spatial = rank - 2 if rank > 2 else 1
    return lw.reduce("mean", x, tuple(range(rank - spatial, rank)), True)


def c_arg_reduce(kind: str):
    """argmax / argmin: the first index where x equals its max (min), as torch returns."""
    def convert(lw, a):
        x, base = a["input"], lw.base_name()
        if a["dim"] is None:
            return None
        best = lw.reduce(kind, x, a["dim"], True, name=f"{base}_{kind}")
        hit = lw.pw("eq", x, best, name=f"{base}_is_{kind}")
        return lw.reduce("first_index", hit, a["dim"], a["keepdim"])
    return convert, "input, dim=None, keepdim=False"


def c_scan(kind: str):
    """cumsum / cumprod. Of a flipped tensor (x.flip(d), as a reverse cumsum is written) it
    is a reverse scan of x, flipped: a flip right after cancels that flip (c_flip)."""
    def convert(lw, a):
        if a.get("dtype") not in (None, torch.float32):
            return None
        x, dim = a["input"], a["dim"]
        flipped = flipped_source(x)
        if flipped is not None and flipped[1] == normalise_dims(dim, len(x.shape)):
            return flip(lw, lw.scan(kind, flipped[0], dim, reverse=True), flipped[1])
        return lw.scan(kind, x, dim)
    return convert, "input, dim, dtype=None"


def flipped_source(node) -> tuple | None:
    """(x, dims) for a node that is x.flip(dims), else None."""
    if getattr(node, "op", None) == "host" and node.attrs.get("flip") is not None:
        return node.args[0], node.attrs["flip"]
    return None


def flip(lw, x, dims: tuple):
    """x.flip(dims) kept in torch (a copy), marked so that a scan or a second flip sees it."""
    return lw.add(Node(lw.fresh(f"{x.name}_flipped"), "host", "kept", (x,),
                       {"expr": "{0}.flip(%r)" % (dims,), "allow": "flip", "label": "flip",
                        "flip": dims}, x.shape, x.dtype, lw.label()))


def c_flip(lw, args, kwargs):
    """torch.flip(x, dims) and x.flip(*dims)."""
    x = args[0]
    dims = kwargs.get("dims", args[1] if len(args) == 2 else list(args[1:]))
    if not isinstance(x, Node) or not x.is_tensor or dims in (None, [], ()):
        return None
    dims = normalise_dims(list(dims) if isinstance(dims, (tuple, list)) else dims, len(x.shape))
    flipped = flipped_source(x)
    if flipped is not None and flipped[1] == dims:
        return flipped[0]                     # flipped twice: x itself
    return flip(lw, x, dims)


def c_cat(lw, args, kwargs):
    """cat((zeros, cumsum(x.narrow(dim, 0, n - 1))), dim): an exclusive cumsum of x (each
    element the sum of those before it), written by the scan itself, not three copies."""
    tensors = args[0] if args else kwargs.get("tensors")
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    if not isinstance(tensors, (list, tuple)) or len(tensors) != 2 or not isinstance(dim, int):
        return None
    zeros, scan = tensors
    if not all(isinstance(t, Node) and t.is_tensor for t in tensors) or scan.op != "scan" or \
            scan.fn != "sum" or scan.attrs.get("reverse") or zeros.op != "host" or \
            zeros.attrs.get("label") != "zeros_like":
        return None
    narrow, dims = scan.args[0], normalise_dims(dim, len(scan.shape))
    if narrow.op != "host" or not NARROW_FROM_0.match(narrow.attrs.get("expr", "")) or \
            scan.attrs["dims"] != dims or zeros.shape[dims[0]] != 1:
        return None
    x = narrow.args[0]
    expected = list(scan.shape)
    expected[dims[0]] += 1
    if list(x.shape) != expected or x.dtype != torch.float32:
        return None
    return lw.scan("sum", x, dims[0], exclusive=True)
