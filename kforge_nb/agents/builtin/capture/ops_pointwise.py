"""Pointwise converters for the builtin agent: activations, arithmetic, clamps, elementwise
max/min, and the ops that pass their input through (eval-mode dropout, contiguous, clone).

Each converter takes the `Lowerer` (lowerer.py) and the op's arguments bound by name (ops.py
holds the tables and the binding) and builds `pointwise` nodes; None means "keep it in torch".
"""
from __future__ import annotations

from ..op_records import TORCH_NAMES
from .ir import Node

SIMPLE_UNARY = TORCH_NAMES       # torch.relu -> relu: the records say which functions are one op
# torch's comparison functions (Tensor.eq, torch.greater, ...) -> the op
COMPARISONS = {"eq": "eq", "ne": "ne", "not_equal": "ne", "lt": "lt", "less": "lt", "le": "le",
               "less_equal": "le", "gt": "gt", "greater": "gt", "ge": "ge",
               "greater_equal": "ge"}
SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def unary(fn: str):
    def convert(lw, a):
        return lw.pw(fn, a["input"])
    return convert, "input, inplace=False"


def c_gelu(lw, a):
    if a["approximate"] not in ("none", "tanh"):
        return None
    return lw.pw("gelu", a["input"], approximate=a["approximate"])


def c_softplus(lw, a):
    return lw.pw("softplus", a["input"], beta=float(a["beta"]), threshold=float(a["threshold"]))


def c_elu(lw, a):
    return lw.pw("elu", a["input"], alpha=float(a["alpha"]), scale=1.0, input_scale=1.0)


def c_selu(lw, a):
    return lw.pw("elu", a["input"], alpha=SELU_ALPHA, scale=SELU_SCALE, input_scale=1.0)


def c_celu(lw, a):
    alpha = float(a["alpha"])
    return lw.pw("elu", a["input"], alpha=alpha, scale=1.0, input_scale=1.0 / alpha)


def c_leaky_relu(lw, a):
    return lw.pw("leaky_relu", a["input"], slope=float(a["negative_slope"]))


def c_hardtanh(lw, a):
    return lw.pw("clamp", a["input"], low=float(a["min_val"]), high=float(a["max_val"]))


def c_relu6(lw, a):
    return lw.pw("clamp", a["input"], low=0.0, high=6.0)


def c_clamp(lw, a):
    low, high, x = a.get("min"), a.get("max"), a["input"]
    if isinstance(low, Node) or isinstance(high, Node):     # tensor bounds: max/min with tensors
        if low is not None:
            x = lw.pw("maximum", x, low)
        return lw.pw("minimum", x, high) if high is not None else x
    return lw.pw("clamp", x, low=None if low is None else float(low),
                 high=None if high is None else float(high))


def binary(fn: str, spec: str = "input, other"):
    def convert(lw, a):
        other = a["other"]
        if a.get("alpha", 1) != 1:
            other = lw.pw("mul", other, a["alpha"])
        return lw.pw(fn, a["input"], other)
    return convert, spec


def c_div(lw, a):
    if a.get("rounding_mode") is not None:
        return None
    return lw.pw("div", a["input"], a["other"])


def c_where(lw, a):
    """torch.where(condition, input, other): a bool condition tensor read as 1 / 0."""
    condition = a["condition"]
    if isinstance(condition, Node) and condition.is_tensor:
        condition = lw.as_float(condition)
    return lw.pw("where", condition, a["input"], a["other"])


def c_masked_fill(lw, a):
    """x.masked_fill(mask, value), out of place: value where the mask holds, else x."""
    mask = a["mask"]
    if isinstance(mask, Node) and mask.is_tensor:
        mask = lw.as_float(mask)
    return lw.pw("where", mask, a["value"], a["input"])


def c_round(lw, a):
    """torch.round: to nearest, ties to even; with `decimals` it scales first (kept in torch)."""
    if a["decimals"] != 0:
        return None
    return lw.pw("round", a["input"])


def c_pow(lw, a):
    return lw.pw("pow", a["input"], a["exponent"])


def c_max_min(kind: str):
    maxmin = {"max": "maximum", "min": "minimum"}[kind]

    def convert(lw, a):
        second = a["dim"]
        if (isinstance(second, Node) and second.is_tensor) or isinstance(second, float):
            return lw.pw(maxmin, a["input"], second)     # a float here was torch.tensor(c)
        if second is None:
            return lw.reduce(kind, a["input"], None, False)
        if not lw.only_first_item_used():      # the indices are wanted too: leave it to torch
            return None
        return (lw.reduce(kind, a["input"], second, a["keepdim"]), None)
    return convert, "input, dim=None, keepdim=False"


# --- pass-through ---------------------------------------------------------------------------------

def c_dropout(lw, a):
    if a["p"] == 0 or not a["training"]:
        return a["input"]
    return None


def c_identity(lw, a):
    return a["input"]


def c_float(lw, a):
    """x.float() of an integer or boolean tensor (a mask, class labels): a conversion in
    forward, float32 from there on."""
    x = a["input"]
    return lw.as_float(x) if isinstance(x, Node) and x.is_tensor else None
