"""What a problem does: the op keys its reference calls, read statically from the source."""
from __future__ import annotations

import ast
import re

from ..pyparse import parse_ast

MATMUL = ("matmul",)
IMPLIED = {           # an op's key -> further ops it stands for
    "mm": MATMUL, "bmm": MATMUL, "addmm": MATMUL, "baddbmm": MATMUL, "addbmm": MATMUL,
    "einsum": MATMUL, "linear": MATMUL, "bilinear": MATMUL, "tensordot": MATMUL,
    "convtranspose": ("conv",), "scaleddotproductattention": ("attention", "matmul", "softmax"),
    "multiheadattention": ("attention", "matmul", "softmax"), "crossentropy": ("logsoftmax",),
    "crossentropyloss": ("crossentropy", "logsoftmax"), "softmin": ("softmax",),
}
SKIPPED = {"get_inputs", "get_init_inputs"}     # the inputs' torch.randn is not the problem's


def op_key(name: str) -> str:
    """One spelling for an op: F.layer_norm, nn.LayerNorm and layer_norm -> 'layernorm';
    conv2d, Conv3d -> 'conv'."""
    key = name.lower().replace("_", "")
    return re.sub(r"(?<=[a-z])[123]d$", "", key)


def problem_ops(source: str) -> set[str]:
    """The op keys a reference uses: names of the functions, methods and nn classes it calls,
    and `@`. Read from the source, never executed."""
    try:
        tree = parse_ast(source)
    except SyntaxError:
        return set()
    for node in ast.walk(tree):      # drop get_inputs() & co. before looking at calls
        if isinstance(node, (ast.Module, ast.ClassDef)):
            node.body = [n for n in node.body
                         if not (isinstance(n, ast.FunctionDef) and n.name in SKIPPED)]
    keys = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            keys.add("matmul")
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else \
                func.id if isinstance(func, ast.Name) else ""
            own = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                func.value.id == "self"      # self.fc(x): its class, nn.Linear, is the op
            if name and not own and not name.startswith("_") and name != "super":
                keys.add(op_key(name))
    for key in list(keys):
        keys.update(IMPLIED.get(key, ()))
    return keys
