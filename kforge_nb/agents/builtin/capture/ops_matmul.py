"""Matrix-product converters for the builtin agent: linear, matmul, mm and bmm become `matmul`
nodes through the `Lowerer` (lowerer.py); an einsum that is a matrix product becomes one (its
leading dims folded into the rows); a product with a diagonal matrix (torch.diag(v) @ B)
becomes a row or column scale, and torch.triu / tril a mask of row and column indices.
"""
from __future__ import annotations

from .ir import Node


def c_linear(lw, a):
    return lw.matmul("linear", a["input"], a["weight"], a["bias"])


def c_matmul(kind: str, spec: str = "input, other"):
    def convert(lw, a):
        return lw.matmul(kind, a["input"], a["other" if "other" in a else "mat2"], None)
    return convert, spec


def diagonal_product(lw, x, y):
    """diag(v) @ B is v[:, None] * B; A @ diag(v) is A * v (each column scaled); None for
    any other product (Builders.matmul asks, whichever way the product was spelled)."""
    for diag, other, left in ((x, y, True), (y, x, False)):
        v = diag.attrs.get("diagonal_of") if isinstance(diag, Node) else None
        if v is None or not isinstance(other, Node) or len(other.shape) != 2:
            continue
        if left:
            v = lw.view(v, (v.shape[0], 1), "{0}.unsqueeze(1)", [v], name=f"{v.name}_column")
            return lw.pw("mul", v, other)
        return lw.pw("mul", other, v)
    return None


def vector_product(lw, x, y):
    """A (M, K) @ x (K, 1): a row reduction, sum(A * x^T, dim=1), not a product of tiles;
    each row's K terms are summed in blocks of partial sums (a GEMM tile's single running
    sum over a long K drifts past strict fp32's bound: KernelBench level 1 problem 4)."""
    if not (isinstance(x, Node) and isinstance(y, Node)) or len(x.shape) != 2 or \
            len(y.shape) != 2 or y.shape[1] != 1 or x.shape[1] != y.shape[0] or x.shape[1] == 1:
        return None
    base = lw.base_name()
    row = lw.view(y, (1, y.shape[0]), "{0}.reshape(1, -1)", [y], name=f"{y.name}_row")
    return lw.reduce("sum", lw.pw("mul", x, row, name=f"{base}_terms"), 1, True)


def c_diag(lw, a):
    """torch.diag of a vector: the square matrix with it on the diagonal (a mask of equal row
    and column indices), marked so that a product with it is a scale instead."""
    v = a["input"]
    if not isinstance(v, Node) or len(v.shape) != 1 or a["diagonal"] != 0:
        return None
    base = lw.base_name()
    rows, cols = lw.iota(v, 0, 2), lw.iota(v, 0, 1)
    column = lw.view(v, (v.shape[0], 1), "{0}.unsqueeze(1)", [v], name=f"{base}_column")
    out = lw.pw("where", lw.pw("eq", rows, cols, name=f"{base}_on_diagonal"), column, 0.0,
                name=base)
    out.attrs["diagonal_of"] = v
    return out


def c_triangle(upper: bool):
    """torch.triu / tril: x where column - row >= diagonal (<= for tril), else 0."""
    def convert(lw, a):
        x, k, base = a["input"], a["diagonal"], lw.base_name()
        if not isinstance(x, Node) or len(x.shape) < 2 or not isinstance(k, int):
            return None
        rank = len(x.shape)
        rows, cols = lw.iota(x, rank - 2, rank), lw.iota(x, rank - 1, rank)
        offset = lw.pw("sub", cols, rows, name=f"{base}_offset")
        keep = lw.pw("ge" if upper else "le", offset, float(k), name=f"{base}_inside")
        return lw.pw("where", keep, x, 0.0)
    return convert, "input, diagonal=0"


def c_einsum(lw, args, kwargs):
    """Two-operand einsums that are matrix products: "...l,lk->...k" (B as stored),
    "...l,kl->...k" (B transposed: F.linear) and "Pil,Plk->Pik" (batched)."""
    if kwargs or len(args) < 2 or not isinstance(args[0], str):
        return None
    operands = list(args[1]) if len(args) == 2 and isinstance(args[1], (list, tuple)) \
        else list(args[1:])
    equation = args[0].replace(" ", "")
    if len(operands) != 2 or "->" not in equation or "." in equation:
        return None
    inputs, out = equation.split("->")
    if inputs.count(",") != 1:
        return None
    (sa, sb), (a, b) = inputs.split(","), operands
    if not all(isinstance(t, Node) and t.is_tensor for t in (a, b)) or \
            len(set(sa)) != len(sa) or len(set(sb)) != len(sb) or \
            len(sa) != len(a.shape) or len(sb) != len(b.shape):
        return None
    contracted = [c for c in sa if c in sb and c not in out]
    if len(contracted) != 1 or sa[-1] != contracted[0]:
        return None
    if len(sb) == 2 and out == sa[:-1] + sb.replace(contracted[0], ""):
        return folded_product(lw, a, b, "nn" if sb[0] == contracted[0] else "nt")
    if len(sa) == len(sb) >= 3 and sa[:-2] == sb[:-2] and sb[-2] == contracted[0] and \
            out == sa[:-1] + sb[-1]:
        return lw.matmul("matmul", a, b, None)
    return None


def folded_product(lw, a: Node, b: Node, layout: str):
    """a (..., K) times b (K, N) ("nn") or b (N, K) ("nt"): the leading dims of a folded
    into rows, one 2-D product, unfolded again."""
    n = b.shape[1] if layout == "nn" else b.shape[0]
    if len(a.shape) == 2:
        return lw.matmul("mm" if layout == "nn" else "linear", a, b, None)
    rows = 1
    for s in a.shape[:-1]:
        rows *= s
    flat = lw.view(a, (rows, a.shape[-1]), "{0}.reshape(-1, {0}.shape[-1])", [a],
                   name=f"{a.name}_rows")
    product = lw.matmul("mm" if layout == "nn" else "linear", flat, b, None, shape=(rows, n))
    return lw.view(product, tuple(a.shape[:-1]) + (n,),
                   "{0}.view({1}.shape[:-1] + ({0}.shape[-1],))", [product, a])
