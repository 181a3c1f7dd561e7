"""Elementwise formulas, written once per target language.

`formula(fn, args, attrs, lang)` returns the expression for one pointwise node given its
operands' expressions. The C++ flavour calls the vectorisable maths it is given
(cpp/maths.py: no libm call in a hot loop); the `std` flavour is the plain library version
(the conservative "fix" candidate).
"""
from __future__ import annotations

import math


def c_float(value) -> str:
    value = float(value)
    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return "INFINITY" if value > 0 else "-INFINITY"
    text = repr(value)
    if "e" not in text and "." not in text:
        text += ".0"
    return text + "f"


def py_float(value) -> str:
    value = float(value)
    if math.isnan(value) or math.isinf(value):
        return f"float('{value}')"
    return repr(value)


COMPARISONS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


class Formulas:
    """Expressions for one language: 'cpp' (vectorisable helpers), 'std' (libm), 'triton'."""

    def __init__(self, lang: str, helpers=()):
        self.lang = lang
        self.helpers = helpers                           # 'cpp': the vectorisable maths it has
        self.used: set[str] = set()
        self.current = "v"                               # the node being written
        self.pending: list[tuple[str, str]] = []         # (name, expr) to define before it

    def let(self, suffix: str, expr: str) -> str:
        """Name a sub-expression the formula uses twice; the writer defines it first."""
        name = f"{self.current}_{suffix}"
        self.pending.append((name, expr))
        return name

    # the primitives each language spells differently
    def lit(self, v) -> str:
        return c_float(v) if self.lang != "triton" else py_float(v)

    def call(self, name: str, x: str) -> str:
        if self.lang == "triton":
            table = {"exp": "tl.exp({})", "log": "tl.log({})", "sqrt": "tl.sqrt({})",
                     "abs": "tl.abs({})", "erf": "tl.erf({})", "sigmoid": "tl.sigmoid({})",
                     # near 0: the odd series (2*sigmoid(2x) - 1 is only absolutely accurate,
                     # and a square root after it magnified that to 1e-3 in a GroupNorm)
                     "tanh": "tl.where(tl.abs({0}) < 0.1, {0} * (1.0 + {0} * {0} * (-0.3333333333"
                             " + {0} * {0} * (0.1333333333 - 0.0539682540 * {0} * {0}))), "
                             "2.0 * tl.sigmoid(2.0 * {0}) - 1.0)",
                     # log(u) * x / (u - 1) with u = 1 + x: accurate for tiny x (Goldberg)
                     "log1p": "tl.where(1.0 + {0} == 1.0, {0}, tl.log(1.0 + {0}) * ({0} / "
                              "((1.0 + {0}) - 1.0)))",
                     "sin": "tl.sin({})", "cos": "tl.cos({})",
                     "softplus": "(tl.maximum({0}, 0.0) + tl.log(1.0 + tl.exp(-tl.abs({0}))))",
                     "floor": "tl.floor({})", "ceil": "tl.ceil({})"}
            return table[name].format(x)
        if self.lang == "cpp" and name in self.helpers:
            self.used.add(name)
            return f"v{name}({x})"
        if name == "sigmoid":
            return f"(1.0f / (1.0f + std::exp(-{x})))"
        if name == "softplus":
            return f"std::log1p(std::exp({x}))"
        return f"std::{'fabs' if name == 'abs' else name}({x})"

    def select(self, cond: str, a: str, b: str) -> str:
        if self.lang == "triton":
            return f"tl.where({cond}, {a}, {b})"
        if "(" in a or "(" in b:
            # where() evaluates both sides first, as a vector select must; a ?: whose arms
            # call functions is control flow to GCC and stops the loop from vectorising.
            self.used.add("where")
            return f"where({cond}, {a}, {b})"
        return f"({cond} ? {a} : {b})"

    def formula(self, fn: str, args: list[str], attrs: dict) -> str:
        x = args[0] if args else ""
        L, sel, call = self.lit, self.select, self.call
        if fn in ("add", "sub", "mul", "div"):
            op = {"add": "+", "sub": "-", "mul": "*", "div": "/"}[fn]
            return f"({args[0]} {op} {args[1]})"
        if fn in ("maximum", "minimum"):
            if self.lang == "triton":
                return f"tl.{fn}({args[0]}, {args[1]})"
            cmp = ">" if fn == "maximum" else "<"    # NaN in the first operand passes through
            return sel(f"({args[0]} {cmp} {args[1]}) || ({args[0]} != {args[0]})", args[0], args[1])
        if fn == "pow":
            return self.power(args[0], args[1], attrs)
        if fn in ("exp", "log", "sqrt", "abs", "erf", "sigmoid", "tanh", "log1p", "sin", "cos",
                  "floor", "ceil"):
            return call(fn, x)
        if fn in COMPARISONS:     # 1 where it holds, else 0 (a mask for `where` or a product)
            return sel(f"{args[0]} {COMPARISONS[fn]} {args[1]}", L(1), L(0))
        if fn == "where":     # the condition is a 0 / 1 mask
            return sel(f"{args[0]} != {L(0)}", args[1], args[2])
        if fn == "neg":
            return f"(-{x})"
        if fn == "rsqrt":
            return f"tl.rsqrt({x})" if self.lang == "triton" else f"(1.0f / {call('sqrt', x)})"
        if fn == "reciprocal":
            return f"({L(1)} / {x})"
        if fn == "square":
            return f"({x} * {x})"
        if fn == "expm1":
            return f"({call('exp', x)} - {L(1)})"
        if fn == "sign":
            return sel(f"{x} > {L(0)}", L(1), sel(f"{x} < {L(0)}", L(-1), L(0)))
        if fn == "relu":      # written so that NaN passes through, as torch.relu does
            return sel(f"{x} < {L(0)}", L(0), x)
        if fn == "leaky_relu":
            return sel(f"{x} > {L(0)}", x, f"{x} * {L(attrs['slope'])}")
        if fn == "clamp":
            out = x
            if attrs.get("low") is not None:
                out = sel(f"{out} < {L(attrs['low'])}", L(attrs["low"]), out)
            if attrs.get("high") is not None:
                out = sel(f"{out} > {L(attrs['high'])}", L(attrs["high"]), out)
            return out
        if fn == "gelu":
            if attrs.get("approximate") == "tanh":
                inner = f"{L(0.7978845608028654)} * ({x} + {L(0.044715)} * {x} * {x} * {x})"
                return f"({L(0.5)} * {x} * ({L(1)} + {call('tanh', inner)}))"
            return f"({L(0.5)} * {x} * ({L(1)} + {call('erf', f'{x} * {L(0.7071067811865476)}')}))"
        if fn == "silu":
            return f"({x} / ({L(1)} + {call('exp', f'-{x}')}))"
        if fn == "mish":
            return f"({x} * {call('tanh', call('softplus', x))})"
        if fn == "softplus":
            # torch returns x itself where beta * x > threshold. Written as a correction added
            # to the smooth value so the call is used on both sides of the select (otherwise
            # GCC moves it into a branch and the loop no longer vectorises).
            beta, threshold = attrs["beta"], attrs["threshold"]
            scaled = f"{x} * {L(beta)}" if beta != 1 else x
            soft = call("softplus", scaled)
            soft = f"{soft} / {L(beta)}" if beta != 1 else soft
            if self.lang == "triton":
                return sel(f"{scaled} > {L(threshold)}", x, soft)
            soft = self.let("smooth", soft)
            return f"({soft} + {sel(f'{scaled} > {L(threshold)}', f'{x} - {soft}', L(0))})"
        if fn == "elu":
            # alpha * (exp(min(x, 0)) - 1) is 0 for x >= 0: no select around the exp needed.
            negative = sel(f"{x} < {L(0)}", x, L(0))
            positive = sel(f"{x} > {L(0)}", x, L(0))
            if attrs["input_scale"] != 1:
                negative = f"{negative} * {L(attrs['input_scale'])}"
            if attrs["scale"] != 1:
                positive = f"{positive} * {L(attrs['scale'])}"
            factor = L(attrs["alpha"] * attrs["scale"])
            return f"({positive} + {factor} * ({call('exp', negative)} - {L(1)}))"
        if fn == "hardswish":
            return f"({x} * {self.clamp06(f'{x} + {L(3)}')} / {L(6)})"
        if fn == "hardsigmoid":
            return f"({self.clamp06(f'{x} + {L(3)}')} / {L(6)})"
        raise KeyError(fn)

    @staticmethod
    def triton_pow(base: str, exponent: str) -> str:
        """pow with torch's signs: a negative base needs an integer exponent ((-1)^y), else NaN."""
        magnitude = f"tl.exp({exponent} * tl.log(tl.abs({base})))"
        integer = f"(tl.floor({exponent}) == {exponent})"
        odd = f"({integer} & (tl.floor({exponent} * 0.5) * 2.0 != {exponent}))"
        signed = f"tl.where({odd}, -{magnitude}, {magnitude})"
        negative = f"tl.where({integer}, {signed}, float('nan'))"
        value = f"tl.where({base} < 0.0, {negative}, {magnitude})"
        return f"tl.where(({exponent} == 0.0) | ({base} == 1.0), 1.0, {value})"

    def clamp06(self, x: str) -> str:
        low = self.select(f"({x}) < {self.lit(0)}", self.lit(0), f"({x})")
        return self.select(f"{low} > {self.lit(6)}", self.lit(6), low)

    def power(self, base: str, exponent: str, attrs: dict) -> str:
        value = attrs.get("exponent_value")
        if value == 0:
            return self.lit(1)
        if value == 1:
            return base
        if value == 2:
            return f"({base} * {base})"
        if value == 3:
            return f"({base} * {base} * {base})"
        if value == 0.5:
            return self.call("sqrt", base)
        if value == -1:
            return f"({self.lit(1)} / {base})"
        if isinstance(value, (int, float)) and float(value).is_integer() and abs(value) <= 8:
            product = " * ".join([f"({base})"] * int(abs(value)))
            return f"({product})" if value > 0 else f"({self.lit(1)} / ({product}))"
        if self.lang == "triton" and isinstance(value, (int, float)):
            # log of a negative base is NaN, as torch's pow is for a fractional exponent
            magnitude = f"tl.exp({self.lit(value)} * tl.log({'tl.abs(' + base + ')' if float(value).is_integer() else base}))"
            if float(value).is_integer() and int(value) % 2:
                return f"tl.where({base} < 0.0, -{magnitude}, {magnitude})"
            return magnitude
        if self.lang == "triton":
            return self.triton_pow(base, exponent)
        if self.lang == "cpp":
            self.used.add("pow")
            return f"vpow({base}, {exponent})"
        return f"std::pow({base}, {exponent})"
