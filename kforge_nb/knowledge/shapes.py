"""How long a problem's rows are: the last dimension of its largest input, read statically from
`get_inputs()` and the module's integer constants (never run). None where the source does not
say plainly (a shape computed by a function, a tensor loaded from a file)."""
from __future__ import annotations

import ast
import math
import operator

from ..pyparse import parse_ast

MAKERS = {"randn", "rand", "zeros", "ones", "empty", "full", "randint", "normal", "tensor"}
ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
              ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow}


def value(node: ast.AST, names: dict[str, int]) -> int | None:
    """An integer expression of constants and known names, or None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) \
            and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.BinOp) and type(node.op) in ARITHMETIC:
        left, right = value(node.left, names), value(node.right, names)
        if left is not None and right is not None and abs(right) < 64:   # no huge powers
            return ARITHMETIC[type(node.op)](left, right)
    return None


def constants(body: list[ast.stmt], names: dict[str, int]) -> dict[str, int]:
    """`name = <integer expression>` assignments (and `a, b = 1, 2`), in order, over the
    known names."""
    found = dict(names)
    for node in body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, given = node.targets[0], node.value
        pairs = zip(target.elts, given.elts) if isinstance(target, ast.Tuple) and \
            isinstance(given, ast.Tuple) and len(target.elts) == len(given.elts) else \
            [(target, given)]
        for name, expression in pairs:
            number = value(expression, found)
            if isinstance(name, ast.Name) and number is not None:
                found[name.id] = number
    return found


def shape_of(call: ast.Call, names: dict[str, int]) -> tuple[int, ...] | None:
    """The shape a tensor maker is given: torch.randn(a, b), torch.rand((a, b)),
    torch.randint(low, high, (a, b)), size=(a, b)."""
    leaf = call.func.attr if isinstance(call.func, ast.Attribute) else \
        call.func.id if isinstance(call.func, ast.Name) else ""
    if leaf not in MAKERS or leaf == "tensor":
        return None
    sized = [kw.value for kw in call.keywords if kw.arg == "size"]
    args = sized or (call.args[2:3] if leaf == "randint" else
                     call.args[:1] if leaf == "full" else call.args)
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        args = args[0].elts
    dims = [value(a, names) for a in args]
    return tuple(dims) if dims and all(d is not None for d in dims) else None


def input_shapes(source: str) -> list[tuple[int, ...]]:
    try:
        tree = parse_ast(source)
    except SyntaxError:
        return []
    names = constants(tree.body, {})
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef) and fn.name == "get_inputs":
            local = constants(fn.body, names)
            return [shape for node in ast.walk(fn) if isinstance(node, ast.Call)
                    if (shape := shape_of(node, local))]
    return []


def row_length(source: str) -> int | None:
    """The last dimension of the largest input with two or more dimensions, or None."""
    shapes = [s for s in input_shapes(source) if len(s) >= 2]
    if not shapes:
        return None
    return max(shapes, key=math.prod)[-1]
