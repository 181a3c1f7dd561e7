"""Elementwise formulas: one class per target language, as tinygrad's renderers.

A language class says how its target spells the primitives every formula is built from (a
literal, a maths function, a select) and, in `code_for_op`, the ops it writes its own way; all
other ops are written once, in their record (op_records.py). `formula(fn, args, attrs)`
returns the expression for one pointwise node given its operands' expressions.

Three languages: `CppFormulas` calls the vectorisable maths it is given (cpp/maths.py: no libm
call in a hot loop), `StdFormulas` the plain library (the conservative "fix" candidate's C++),
`TritonFormulas` triton.language.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .op_records import CAST, OPS

# bf16 / fp16: the storage dtypes a kernel rounds to (capture/ir.py HALF), by short name
STORAGE = {torch.bfloat16: "bf16", torch.float16: "fp16"}


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


class Formulas:
    """What every language shares: the node being written and the sub-expressions it names."""

    code_for_op: dict = {}         # op -> write(formulas, args, attrs), where this language differs

    def __init__(self):
        self.used: set[str] = set()                      # helpers the expressions call (C++)
        self.current = "v"                               # the node being written
        self.pending: list[tuple[str, str]] = []         # (name, expr) to define before it

    def formula(self, fn: str, args: list[str], attrs: dict) -> str:
        if fn == CAST:                 # the value itself; the node's dtype says how it rounds
            return args[0]
        write = self.code_for_op.get(fn) or OPS[fn].write      # KeyError: not an op we know
        return write(self, args, attrs)

    def let(self, suffix: str, expr: str) -> str:
        """Name a sub-expression the formula uses twice; the writer defines it first."""
        name = f"{self.current}_{suffix}"
        self.pending.append((name, expr))
        return name

    # each language's primitives
    def lit(self, v) -> str:
        raise NotImplementedError

    def call(self, name: str, x: str) -> str:
        raise NotImplementedError

    def select(self, cond: str, a: str, b: str) -> str:
        raise NotImplementedError

    def past_threshold(self, x: str, cond: str, soft: str) -> str:
        """softplus: x itself where `cond` holds, else the smooth value."""
        raise NotImplementedError

    def general_power(self, base: str, exponent: str, value) -> str:
        """base ** exponent where the exponent is not a small whole constant (`value` is the
        constant exponent, or None for a tensor)."""
        raise NotImplementedError

    def rounded(self, dtype, expr: str) -> str:
        """`expr`, a float32 value, rounded to the nearest bf16 / fp16 (ties to even) and kept
        in float32: torch rounds every op's result to its tensor's dtype. float32 as it is."""
        raise NotImplementedError

    def loaded(self, dtype, expr: str) -> str:
        """A value read from storage of `dtype`, as float32 (exact)."""
        raise NotImplementedError

    def divide_exactly(self, x: str, d: str) -> str:
        """x / d correctly rounded (IEEE), as torch divides two tensors on every device."""
        return f"({x} / {d})"

    def divide_by_number(self, x: str, d: str, number) -> str:
        """x / d for a Python number d, as torch divides by one on the device the kernel runs
        on (C++: the CPU, where torch divides truly)."""
        return f"({x} / {d})"


class StdFormulas(Formulas):
    """C++ with the library's maths (libm): the conservative version."""

    def __init__(self):
        super().__init__()
        self.libm: set[str] = set()     # the library's functions the expressions call

    def lit(self, v) -> str:
        return c_float(v)

    def std(self, function: str, *args: str) -> str:
        """A call of libm's `function` (GCC vectorises none without fast-math)."""
        self.libm.add(function)
        return f"std::{function}({', '.join(args)})"

    def call(self, name: str, x: str) -> str:
        if name == "sigmoid":
            return f"(1.0f / (1.0f + {self.std('exp', f'-{x}')}))"
        if name == "softplus":
            return self.std("log1p", self.std("exp", x))
        return self.std("fabs" if name == "abs" else name, x)

    def select(self, cond: str, a: str, b: str) -> str:
        if "(" in a or "(" in b:
            # where() evaluates both sides first, as a vector select must; a ?: whose arms
            # call functions is control flow to GCC and stops the loop from vectorising.
            self.used.add("where")
            return f"where({cond}, {a}, {b})"
        return f"({cond} ? {a} : {b})"

    def past_threshold(self, x: str, cond: str, soft: str) -> str:
        # Written as a correction added to the smooth value so the call is used on both sides
        # of the select (otherwise GCC moves it into a branch and the loop stops vectorising).
        soft = self.let("smooth", soft)
        return f"({soft} + {self.select(cond, f'{x} - {soft}', self.lit(0))})"

    def general_power(self, base: str, exponent: str, value) -> str:
        return self.std("pow", base, exponent)

    # bf16 / fp16 values travel as their 16 bits (uint16_t); cpp/maths.py STORAGE converts
    def rounded(self, dtype, expr: str) -> str:
        return self.storage_call(dtype, "round", expr)

    def loaded(self, dtype, expr: str) -> str:
        return self.storage_call(dtype, "load", expr)

    def stored(self, dtype, expr: str) -> str:
        """A float32 value (already rounded) as the bits stored in `dtype`'s uint16_t."""
        return self.storage_call(dtype, "bits", expr)

    def storage_call(self, dtype, verb: str, expr: str) -> str:
        if dtype not in STORAGE:
            return expr
        name = f"{STORAGE[dtype]}_{verb}"
        self.used.add(name)
        return f"{name}({expr})"


class CppFormulas(StdFormulas):
    """C++ calling the vectorisable maths helpers it is given (cpp/maths.py), libm otherwise."""

    def __init__(self, helpers=()):
        super().__init__()
        self.helpers = helpers

    def call(self, name: str, x: str) -> str:
        if name not in self.helpers:
            return super().call(name, x)
        self.used.add(name)
        return f"v{name}({x})"

    def general_power(self, base: str, exponent: str, value) -> str:
        self.used.add("pow")
        return f"vpow({base}, {exponent})"


def float32_reciprocal(number) -> float:
    """1 / number as torch computes it for a GPU's multiply: in float32, of the float32
    number."""
    return float(np.float32(1.0) / np.float32(number))


def power_of_two(number) -> bool:
    mantissa, _ = math.frexp(abs(float(number)))
    return mantissa == 0.5


# torch divides a tensor by a Python number as a multiply by the number's float32 reciprocal
# on a GPU (ATen's div_true_kernel_cuda) and as a true division on the CPU; Triton kernels
# that divide by a number read this to do the same wherever they run.
RECIPROCAL_FLAG = "NUMBER_DIVISION_BY_RECIPROCAL"
RECIPROCAL_FLAG_DEFINITION = (
    "# torch divides a tensor by a Python number as a multiply by the number's float32\n"
    "# reciprocal on a GPU and as a true division on the CPU (Triton's interpreter): the\n"
    "# kernels below do the same, so a rounding after the division agrees with torch's.\n"
    f"{RECIPROCAL_FLAG} = tl.constexpr(torch.cuda.is_available())")


# bf16 in Triton by its bits: torch rounds a float32 to bf16 to nearest, ties to even, which
# `.to(tl.bfloat16)` does on a GPU but not under the CPU interpreter (it truncates, and flushes
# bf16 subnormals to zero on loads and stores); these are the same everywhere.
BF16_HELPERS = ("round_to_bf16", "bf16_as_float32", "float32_as_bf16")
BF16_DEFINITIONS = """@triton.jit
def round_to_bf16(x):
    # float32 -> the nearest bfloat16, ties to even, kept in float32 (NaN stays NaN): add half
    # an ulp of bf16 (less one, plus the last kept bit) and drop the 16 low bits
    bits = x.to(tl.uint32, bitcast=True)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return tl.where(x != x, x, bits.to(tl.float32, bitcast=True))


@triton.jit
def bf16_as_float32(x):
    # a loaded bf16 as float32: its 16 bits are the float's upper half
    return (x.to(tl.uint16, bitcast=True).to(tl.uint32) << 16).to(tl.float32, bitcast=True)


@triton.jit
def float32_as_bf16(x, out_ptr):
    # a float32 holding a bf16 value (rounded already) as the bf16 that out_ptr points at: its
    # upper half
    bits = (x.to(tl.uint32, bitcast=True) >> 16).to(tl.uint16)
    return bits.to(out_ptr.dtype.element_ty, bitcast=True)"""


def triton_maximum(fn: str):
    return lambda f, a, attrs: f"tl.{fn}({a[0]}, {a[1]})"


class TritonFormulas(Formulas):
    """triton.language."""

    CALLS = {"exp": "tl.exp({})", "log": "tl.log({})", "sqrt": "tl.sqrt({})",
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
             # to nearest, ties to even, as torch.round: adding 2**23 to |x| < 2**23 leaves no
             # bits for a fraction, so the float32 add rounds it away (IEEE: ties to even);
             # larger |x| are whole already. libdevice's rint has no interpreter version.
             "nearbyint": "tl.where(tl.abs({0}) < 8388608.0, tl.where({0} < 0.0, "
                          "-((8388608.0 - {0}) - 8388608.0), ({0} + 8388608.0) - 8388608.0), "
                          "{0})",
             "trunc": "tl.where({0} < 0.0, tl.ceil({0}), tl.floor({0}))",
             "softplus": "(tl.maximum({0}, 0.0) + tl.log(1.0 + tl.exp(-tl.abs({0}))))",
             "floor": "tl.floor({})", "ceil": "tl.ceil({})"}
    code_for_op = {"maximum": triton_maximum("maximum"), "minimum": triton_maximum("minimum"),
                   "rsqrt": lambda f, a, attrs: f"tl.rsqrt({a[0]})"}

    def lit(self, v) -> str:
        return py_float(v)

    def call(self, name: str, x: str) -> str:
        return self.CALLS[name].format(x)

    def select(self, cond: str, a: str, b: str) -> str:
        return f"tl.where({cond}, {a}, {b})"

    def past_threshold(self, x: str, cond: str, soft: str) -> str:
        return self.select(cond, x, soft)

    def rounded(self, dtype, expr: str) -> str:
        if dtype == torch.bfloat16:
            return f"round_to_bf16({expr})"
        if dtype == torch.float16:            # to nearest, ties to even, on a GPU and interpreted
            return f"({expr}).to(tl.float16).to(tl.float32)"
        return expr

    def loaded(self, dtype, expr: str) -> str:
        if dtype == torch.bfloat16:
            return f"bf16_as_float32({expr})"
        return f"{expr}.to(tl.float32)" if dtype == torch.float16 else expr

    def stored(self, dtype, expr: str, pointer: str) -> str:
        """A float32 value (already rounded) as what `pointer` holds (fp16 and the rest
        convert exactly on the store)."""
        return f"float32_as_bf16({expr}, {pointer})" if dtype == torch.bfloat16 else expr

    def divide_exactly(self, x: str, d: str) -> str:
        # Triton's `/` on float32 is an approximate division on a GPU (up to 2 ulp), and so
        # is tl.fdiv(ieee_rounding=True) on Triton 3.6 (measured on an H100: div.full.f32)
        return f"tl.math.div_rn({x}, {d})"

    def divide_by_number(self, x: str, d: str, number) -> str:
        reciprocal = self.lit(float32_reciprocal(number))
        if power_of_two(number):              # an exact reciprocal: the same on every device
            return f"({x} * {reciprocal})"
        return f"(({x} * {reciprocal}) if {RECIPROCAL_FLAG} else {self.divide_exactly(x, d)})"

    def general_power(self, base: str, exponent: str, value) -> str:
        if not isinstance(value, (int, float)):
            return self.tensor_power(base, exponent)
        # log of a negative base is NaN, as torch's pow is for a fractional exponent
        whole = float(value).is_integer()
        magnitude = f"tl.exp({self.lit(value)} * tl.log({f'tl.abs({base})' if whole else base}))"
        if whole and int(value) % 2:
            return f"tl.where({base} < 0.0, -{magnitude}, {magnitude})"
        return magnitude

    @staticmethod
    def tensor_power(base: str, exponent: str) -> str:
        """pow with torch's signs: a negative base needs an integer exponent ((-1)^y), else NaN."""
        magnitude = f"tl.exp({exponent} * tl.log(tl.abs({base})))"
        integer = f"(tl.floor({exponent}) == {exponent})"
        odd = f"({integer} & (tl.floor({exponent} * 0.5) * 2.0 != {exponent}))"
        signed = f"tl.where({odd}, -{magnitude}, {magnitude})"
        negative = f"tl.where({integer}, {signed}, float('nan'))"
        value = f"tl.where({base} < 0.0, {negative}, {magnitude})"
        return f"tl.where(({exponent} == 0.0) | ({base} == 1.0), 1.0, {value})"
