"""One record per pointwise op of the builtin agent's graph: everything the agent knows of it.

A record says how many operands the op takes, which torch functions are this op with no
argument of their own (capture maps them straight to it; kforge_nb/compute_ops.py, where the
guardrails read them too, is their one home), whether a bool or integer tensor
beside a float32 one is promoted as torch does, its cost in FLOPs per element (the evaluator's
op_costs: one home for costs) and with it whether it is expensive (a transcendental: worth
parking in the output rather than computing twice, cpp/passes.py), and how it is written.

How it is written: `write(f, args, attrs)` builds the expression from a language's primitives
(`f.lit`, `f.call`, `f.select`, `f.let`; elementwise.py holds one class per language), so a
formula is written once for every target. A language that spells an op its own way (Triton's
`tl.maximum`) says so in its `code_for_op` table, as tinygrad's renderers do.

Adding an op: a record here, its name and torch spellings in compute_ops.POINTWISE (and a
maths body in cpp/maths.py plus a Triton call in elementwise.py when it is a new transcendental
function).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ...compute_ops import POINTWISE
from ...evaluator.worker.op_costs import EXP, op_cost

Write = Callable[[object, list, dict], str]     # (formulas, operand expressions, attrs) -> expr


@dataclass(frozen=True)
class OpRecord:
    name: str                          # the pointwise node's fn
    arity: int                         # operands (tensors or scalars)
    write: Write                       # its expression from the language's primitives
    promotes: bool = False             # x * mask: a bool/int tensor is made float32 first
    boolean: bool = False              # torch's result is a bool tensor (the kernels carry
    #                                    it as 1 / 0 and store it as bool where it is an output)
    steps: bool = False                # its result moves a whole step where an operand moves
    #                                    by its last bit (round, floor, a comparison): the
    #                                    arithmetic before it must be torch's, bit for bit

    @property
    def torch(self) -> tuple[str, ...]:
        """The torch functions that are this op, one input and no argument of their own
        (torch.relu, F.silu, Tensor.exp), as compute_ops.POINTWISE holds them."""
        return POINTWISE[self.name]

    @property
    def cost(self) -> int:
        """FLOPs per element, as the evaluator counts the reference's (op_costs.COSTS)."""
        return op_cost(self.name, ())

    @property
    def expensive(self) -> bool:
        """A transcendental function or one built on exp/log: recomputing costs more than
        storing it once and reading it back."""
        return self.cost >= EXP


# --- writers shared by several records ---------------------------------------------------------

def infix(symbol: str) -> Write:
    return lambda f, a, attrs: f"({a[0]} {symbol} {a[1]})"


def maths(name: str) -> Write:
    """A maths function of the language (libm, the vectorised helpers, tl.*)."""
    return lambda f, a, attrs: f.call(name, a[0])


def compare(symbol: str) -> Write:
    """1 where it holds, else 0 (a mask for `where` or a product)."""
    return lambda f, a, attrs: f.select(f"{a[0]} {symbol} {a[1]}", f.lit(1), f.lit(0))


def holds(f, x: str) -> str:
    """A mask's truth as torch reads a number: anything but 0 (NaN included) is true."""
    return f"{x} != {f.lit(0)}"


def extreme(symbol: str) -> Write:
    """maximum / minimum with NaN in the first operand passing through."""
    return lambda f, a, attrs: f.select(f"({a[0]} {symbol} {a[1]}) || ({a[0]} != {a[0]})",
                                        a[0], a[1])


def clamp06(f, x: str) -> str:
    low = f.select(f"({x}) < {f.lit(0)}", f.lit(0), f"({x})")
    return f.select(f"{low} > {f.lit(6)}", f.lit(6), low)


# --- writers of one record each ----------------------------------------------------------------

def w_where(f, a, attrs):
    return f.select(holds(f, a[0]), a[1], a[2])     # the condition is a 0 / 1 mask


def w_logical_and(f, a, attrs):
    return f.select(holds(f, a[0]), f.select(holds(f, a[1]), f.lit(1), f.lit(0)), f.lit(0))


def w_logical_or(f, a, attrs):
    return f.select(holds(f, a[0]), f.lit(1), f.select(holds(f, a[1]), f.lit(1), f.lit(0)))


def w_logical_not(f, a, attrs):
    return f.select(holds(f, a[0]), f.lit(0), f.lit(1))


def w_div(f, a, attrs):
    """torch's division (see `mark_divisions`): by a Python number as torch divides by one on
    the device; a number over a tensor as torch's reciprocal times the number; correctly
    rounded where a rounding follows (`exact`); else the language's own `/`."""
    if attrs.get("divisor") is not None:
        return f.divide_by_number(a[0], a[1], attrs["divisor"])
    if attrs.get("numerator") is not None:
        reciprocal = w_reciprocal(f, a[1:], attrs)
        return reciprocal if attrs["numerator"] == 1 else f"({reciprocal} * {a[0]})"
    if attrs.get("exact"):
        return f.divide_exactly(a[0], a[1])
    return f"({a[0]} / {a[1]})"


def w_reciprocal(f, a, attrs):
    if attrs.get("exact"):
        return f.divide_exactly(f.lit(1), a[0])
    return f"({f.lit(1)} / {a[0]})"


def w_sign(f, a, attrs):
    x, L = a[0], f.lit
    return f.select(f"{x} > {L(0)}", L(1), f.select(f"{x} < {L(0)}", L(-1), L(0)))


def w_relu(f, a, attrs):
    return f.select(f"{a[0]} < {f.lit(0)}", f.lit(0), a[0])    # NaN passes, as torch.relu


def w_leaky_relu(f, a, attrs):
    x = a[0]
    return f.select(f"{x} > {f.lit(0)}", x, f"{x} * {f.lit(attrs['slope'])}")


def w_clamp(f, a, attrs):
    out = a[0]
    for bound, cmp in (("low", "<"), ("high", ">")):
        if attrs.get(bound) is not None:
            out = f.select(f"{out} {cmp} {f.lit(attrs[bound])}", f.lit(attrs[bound]), out)
    return out


def w_gelu(f, a, attrs):
    x, L = a[0], f.lit
    if attrs.get("approximate") == "tanh":
        inner = f"{L(0.7978845608028654)} * ({x} + {L(0.044715)} * {x} * {x} * {x})"
        return f"({L(0.5)} * {x} * ({L(1)} + {f.call('tanh', inner)}))"
    return f"({L(0.5)} * {x} * ({L(1)} + {f.call('erf', f'{x} * {L(0.7071067811865476)}')}))"


def w_silu(f, a, attrs):
    return f"({a[0]} / ({f.lit(1)} + {f.call('exp', f'-{a[0]}')}))"


def w_mish(f, a, attrs):
    return f"({a[0]} * {f.call('tanh', f.call('softplus', a[0]))})"


def w_softplus(f, a, attrs):
    """torch returns x itself where beta * x > threshold; the language says how it selects
    (`f.past_threshold`)."""
    x, beta = a[0], attrs["beta"]
    scaled = f"{x} * {f.lit(beta)}" if beta != 1 else x
    soft = f.call("softplus", scaled)
    soft = f"{soft} / {f.lit(beta)}" if beta != 1 else soft
    return f.past_threshold(x, f"{scaled} > {f.lit(attrs['threshold'])}", soft)


def w_elu(f, a, attrs):
    # alpha * (exp(min(x, 0)) - 1) is 0 for x >= 0: no select around the exp needed.
    x, L = a[0], f.lit
    negative = f.select(f"{x} < {L(0)}", x, L(0))
    positive = f.select(f"{x} > {L(0)}", x, L(0))
    if attrs["input_scale"] != 1:
        negative = f"{negative} * {L(attrs['input_scale'])}"
    if attrs["scale"] != 1:
        positive = f"{positive} * {L(attrs['scale'])}"
    factor = L(attrs["alpha"] * attrs["scale"])
    return f"({positive} + {factor} * ({f.call('exp', negative)} - {L(1)}))"


def w_pow(f, a, attrs):
    """A constant small whole exponent is multiplications; any other power is the language's
    (`f.general_power`)."""
    base, value, L = a[0], attrs.get("exponent_value"), f.lit
    if value == 0:
        return L(1)
    if value == 1:
        return base
    if value == 2:
        return f"({base} * {base})"
    if value == 3:
        return f"({base} * {base} * {base})"
    if value == 0.5:
        return f.call("sqrt", base)
    if value == -1:
        return f"({L(1)} / {base})"
    if isinstance(value, (int, float)) and float(value).is_integer() and abs(value) <= 8:
        product = " * ".join([f"({base})"] * int(abs(value)))
        return f"({product})" if value > 0 else f"({L(1)} / ({product}))"
    return f.general_power(base, a[1], value)


RECORDS = (
    OpRecord("add", 2, infix("+"), promotes=True),
    OpRecord("sub", 2, infix("-"), promotes=True),
    OpRecord("mul", 2, infix("*"), promotes=True),
    OpRecord("div", 2, w_div, promotes=True),
    OpRecord("maximum", 2, extreme(">"), promotes=True),
    OpRecord("minimum", 2, extreme("<"), promotes=True),
    OpRecord("pow", 2, w_pow),
    *(OpRecord(name, 2, compare(symbol), steps=True, boolean=True) for name, symbol in
      (("eq", "=="), ("ne", "!="), ("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">="))),
    OpRecord("where", 3, w_where),
    OpRecord("logical_and", 2, w_logical_and, boolean=True),
    OpRecord("logical_or", 2, w_logical_or, boolean=True),
    OpRecord("logical_not", 1, w_logical_not, boolean=True),
    OpRecord("relu", 1, w_relu),
    OpRecord("sigmoid", 1, maths("sigmoid")),
    OpRecord("tanh", 1, maths("tanh")),
    OpRecord("exp", 1, maths("exp")),
    OpRecord("log", 1, maths("log")),
    OpRecord("abs", 1, maths("abs")),
    OpRecord("neg", 1, lambda f, a, attrs: f"(-{a[0]})"),
    OpRecord("sqrt", 1, maths("sqrt")),
    OpRecord("rsqrt", 1, lambda f, a, attrs: f"({f.lit(1)} / {f.call('sqrt', a[0])})"),
    OpRecord("erf", 1, maths("erf")),
    OpRecord("sin", 1, maths("sin")),
    OpRecord("cos", 1, maths("cos")),
    OpRecord("log1p", 1, maths("log1p")),
    OpRecord("expm1", 1, lambda f, a, attrs: f"({f.call('exp', a[0])} - {f.lit(1)})"),
    OpRecord("reciprocal", 1, w_reciprocal),
    OpRecord("square", 1, lambda f, a, attrs: f"({a[0]} * {a[0]})"),
    OpRecord("floor", 1, maths("floor"), steps=True),
    OpRecord("ceil", 1, maths("ceil"), steps=True),
    OpRecord("trunc", 1, maths("trunc"), steps=True),
    # torch.round: to nearest, ties to even (its `decimals` is a converter's, ops_pointwise.py)
    OpRecord("round", 1, maths("nearbyint"), steps=True),
    OpRecord("silu", 1, w_silu),
    OpRecord("mish", 1, w_mish),
    OpRecord("hardswish", 1, lambda f, a, attrs: f"({a[0]} * {clamp06(f, f'{a[0]} + {f.lit(3)}')}"
                                                 f" / {f.lit(6)})"),
    OpRecord("hardsigmoid", 1, lambda f, a, attrs: f"({clamp06(f, f'{a[0]} + {f.lit(3)}')} / "
                                                   f"{f.lit(6)})"),
    OpRecord("sign", 1, w_sign),
    OpRecord("leaky_relu", 1, w_leaky_relu),
    OpRecord("clamp", 1, w_clamp),
    OpRecord("gelu", 1, w_gelu),
    OpRecord("softplus", 1, w_softplus),
    OpRecord("elu", 1, w_elu),
)
OPS = {r.name: r for r in RECORDS}
# x.to(dtype) between float dtypes: a pointwise node whose value is its operand's, rounded where
# the node's dtype is bf16 / fp16 (as every op's result is). No record: a conversion is no
# compute to torch (the audit's values, not compute), and costs nothing.
CAST = "cast"


def expensive(fn: str) -> bool:
    """Whether the pointwise op `fn` is worth computing once and reading back."""
    return fn in OPS and OPS[fn].expensive


# torch function name -> the op it is, for the torch functions that are one op exactly
TORCH_NAMES = {name: r.name for r in RECORDS for name in r.torch}
PROMOTING = frozenset(r.name for r in RECORDS if r.promotes)
STEPS = frozenset(r.name for r in RECORDS if r.steps)
BOOLEAN = frozenset(r.name for r in RECORDS if r.boolean)


def mark_bool_outputs(graph) -> None:
    """A comparison or logical op that forward returns is a bool tensor in torch: its kernel
    stores it so; whole numbers from positions or a mask's count are its int64. Inside kernels
    (a mask multiplied or selected with) they stay float32, 1 / 0 and whole numbers."""
    for node in graph.outputs:
        if getattr(node, "op", None) == "pointwise" and node.fn in BOOLEAN and not node.users:
            node.dtype = torch.bool
        elif getattr(node, "op", None) in ("pointwise", "reduce") and not node.users and \
                node.attrs.get("integers"):    # positions, a mask's count (capture/positions.py)
            node.dtype = torch.int64


def mark_divisions(nodes) -> None:
    """Say in each division's attrs how torch divides, for its formula (`w_div`): by a Python
    number (`divisor`: a multiply by its float32 reciprocal on a GPU, a true division on the
    CPU); a number over a tensor (`numerator`: `Tensor.__rtruediv__` is the reciprocal times
    the number); and, where the result reaches a stepping op (round, floor, a comparison)
    through pointwise ops, `exact`: there a last-bit difference from torch's quotient is a
    whole quantisation step (`round(x / scale)`), so it is never a reciprocal multiply or an
    approximate division (a conversion left to torch, to fp8 or an integer, rounds as well).
    Other divisions keep the faster forms."""
    number = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
    for node in nodes:
        if node.op != "pointwise" or node.fn not in ("div", "reciprocal"):
            continue
        if node.fn == "div" and number(node.args[1]):
            node.attrs["divisor"] = float(node.args[1])
        elif node.fn == "div" and number(node.args[0]):
            node.attrs["numerator"] = float(node.args[0])
        if reaches_step(node):
            node.attrs["exact"] = True


def reaches_step(node) -> bool:
    todo, seen = list(node.users), set()
    while todo:
        user = todo.pop()
        if user.op == "host" and user.attrs.get("label") == "Tensor.to":
            return True        # a conversion torch keeps (to fp8, to an integer) rounds too
        if id(user) in seen or user.op != "pointwise":
            continue
        if user.fn in STEPS:
            return True
        seen.add(id(user))
        todo.extend(user.users)
    return False
