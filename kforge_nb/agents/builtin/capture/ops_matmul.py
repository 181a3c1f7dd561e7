"""Matrix-product converters for the builtin agent: linear, matmul, mm and bmm become `matmul`
nodes through the `Lowerer` (lowerer.py).
"""
from __future__ import annotations


def c_linear(lw, a):
    return lw.matmul("linear", a["input"], a["weight"], a["bias"])


def c_matmul(kind: str, spec: str = "input, other"):
    def convert(lw, a):
        return lw.matmul(kind, a["input"], a["other" if "other" in a else "mat2"], None)
    return convert, spec

