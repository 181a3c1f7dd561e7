"""Elementwise formulas, written once per target language.

`formula(fn, args, attrs, lang)` returns the expression for one pointwise node given its
operands' expressions. The C++ flavour can use the vectorisable helpers of `CPP_HELPERS`
(GCC calls libm one element at a time without -ffast-math, which we may not use, so loops
that call std::exp are not vectorised); the `std` flavour is the plain library version.
"""
from __future__ import annotations

import math

# Vectorisable float math for the CPU. Each helper is branch-free (selects, not ifs), so a loop
# that calls it still vectorises; accuracy is within 2 ulp of libm, far inside the 1e-4 tolerance.
CPP_HELPERS = {
    "simd_function": r"""
// The math helpers below are compiled as OpenMP "declare simd" functions: GCC emits a vector
// version of each (16 floats at a time with AVX-512) that vectorised loops call. They are kept
// out of line on purpose: inlined, their special-case selects (exp overflowing to infinity, ...)
// get specialised into branches when helpers are chained, and the loop stops vectorising.
#define SIMD_FUNCTION _Pragma("omp declare simd notinbranch") __attribute__((noinline)) static
""",
    "where": r"""
// where(c, a, b): both a and b are computed before the choice (a select, not a branch).
static inline float where(bool c, float a, float b) {
    return c ? a : b;
}
""",
    "vexp": r"""
// exp(x) without a libm call, so loops around it vectorise (vexp below; erf, tanh and sigmoid
// use the inline body directly). Range reduction x = k*ln2 + r with
// |r| <= ln2/2 (ln2 split in two parts for accuracy), a degree-6 polynomial for e^r (Cephes),
// then 2^k built directly in the exponent bits. Over/underflow are handled by selects.
static inline float exp_inline(float x) {
    const float k = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round(x/ln2)
    float r = std::fma(k, -0.693359375f, x);
    r = std::fma(k, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = std::fma(p, r, 1.3981999507e-3f);
    p = std::fma(p, r, 8.3334519073e-3f);
    p = std::fma(p, r, 4.1665795894e-2f);
    p = std::fma(p, r, 1.6666665459e-1f);
    p = std::fma(p, r, 5.0000001201e-1f);
    p = std::fma(p, r * r, r + 1.0f);
    const int32_t k_int = (int32_t)k;
    const float two_to_k = __builtin_bit_cast(float, (k_int + 127) << 23);
    float y = p * two_to_k;
    y = x > 88.3762626647949f ? INFINITY : y;
    y = x < -87.3365447504f ? 0.0f : y;
    return y;
}

SIMD_FUNCTION float vexp(float x) {
    return exp_inline(x);
}
""",
    "vlog_unit": r"""
// log(u) for finite u > 0 without a libm call: u = m * 2^e with m in [sqrt(1/2), sqrt(2)), a
// Cephes polynomial for log(m), then e*ln2 added in two parts.
SIMD_FUNCTION float vlog_unit(float u) {
    const int32_t bits = __builtin_bit_cast(int32_t, u);
    float e = (float)(((bits >> 23) & 0xff) - 126);
    float m = __builtin_bit_cast(float, (bits & 0x007fffff) | 0x3f000000);
    const bool small = m < 0.707106781186547524f;
    const float m_small = m + m - 1.0f, m_big = m - 1.0f;
    e = small ? e - 1.0f : e;
    m = small ? m_small : m_big;
    const float z = m * m;
    float p = 7.0376836292e-2f;
    p = std::fma(p, m, -1.1514610310e-1f);
    p = std::fma(p, m, 1.1676998740e-1f);
    p = std::fma(p, m, -1.2420140846e-1f);
    p = std::fma(p, m, 1.4249322787e-1f);
    p = std::fma(p, m, -1.6668057665e-1f);
    p = std::fma(p, m, 2.0000714765e-1f);
    p = std::fma(p, m, -2.4999993993e-1f);
    p = std::fma(p, m, 3.3333331174e-1f);
    float y = p * m * z;
    y = std::fma(e, -2.12194440e-4f, y);
    y = std::fma(z, -0.5f, y);
    y = m + y;
    return std::fma(e, 0.693359375f, y);
}
""",
    "vlog": r"""
// log(x): vlog_unit, with zero, negative, infinite and NaN inputs handled by selects.
SIMD_FUNCTION float vlog(float x) {
    float y = vlog_unit(x);
    y = x == 0.0f ? -INFINITY : y;
    y = x < 0.0f ? NAN : y;
    y = x == INFINITY ? INFINITY : y;
    return x != x ? x : y;
}
""",
    "vsqrt": r"""
// sqrt(x): std::sqrt may set errno for x < 0, which stops GCC from vectorising a loop that
// calls it inline; as a declare-simd function it becomes one vsqrtps per 16 values.
SIMD_FUNCTION float vsqrt(float x) {
    return std::sqrt(x);
}
""",
    "vsoftplus": r"""
// softplus(x) = log(1 + exp(x)), computed as max(x, 0) + log(1 + exp(-|x|)): the exp cannot
// overflow and the log's argument stays in [1, 2], so no special cases (and no selects that
// would turn into branches) are needed.
SIMD_FUNCTION float vsoftplus(float x) {
    const float positive = x > 0.0f ? x : 0.0f;
    return positive + vlog_unit(1.0f + vexp(-std::fabs(x)));
}
""",
    "vlog1p": r"""
// log(1 + x) that stays accurate for tiny x: log(u) * x / (u - 1) with u = 1 + x (Goldberg).
SIMD_FUNCTION float vlog1p(float x) {
    const float u = 1.0f + x;
    const float y = vlog(u) * (x / (u - 1.0f));
    return u == 1.0f ? x : (u == INFINITY ? INFINITY : y);
}
""",
    "vtanh": r"""
// tanh(x) = 1 - 2 / (exp(2x) + 1): exact limits at +-infinity, absolute error ~1e-7 near 0.
SIMD_FUNCTION float vtanh(float x) {
    return 1.0f - 2.0f / (exp_inline(2.0f * x) + 1.0f);
}
""",
    "vsigmoid": r"""
SIMD_FUNCTION float vsigmoid(float x) {
    return 1.0f / (1.0f + exp_inline(-x));
}
""",
    "verf": r"""
// erf(x), Abramowitz & Stegun 7.1.26: absolute error below 1.5e-7.
SIMD_FUNCTION float verf(float x) {
    const float a = std::fabs(x);
    const float t = 1.0f / std::fma(0.3275911f, a, 1.0f);
    float p = 1.061405429f;
    p = std::fma(p, t, -1.453152027f);
    p = std::fma(p, t, 1.421413741f);
    p = std::fma(p, t, -0.284496736f);
    p = std::fma(p, t, 0.254829592f);
    const float y = 1.0f - p * t * exp_inline(-a * a);
    return x < 0.0f ? -y : y;
}
""",
}
HELPER_DEPENDS = {"vlog1p": ["vlog"], "vlog": ["vlog_unit"], "vtanh": ["vexp"],
                  "vsigmoid": ["vexp"], "verf": ["vexp"], "vsoftplus": ["vexp", "vlog_unit"]}


def with_dependencies(helper: str) -> list[str]:
    """The helper and everything it calls, transitively."""
    out = [helper]
    for dep in HELPER_DEPENDS.get(helper, []):
        out += with_dependencies(dep)
    return out


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
    """Expressions for one language: 'cpp' (vectorisable helpers), 'std' (libm), 'triton'."""

    def __init__(self, lang: str):
        self.lang = lang
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
                     "tanh": "(2.0 * tl.sigmoid(2.0 * {}) - 1.0)",
                     "log1p": "tl.log(1.0 + {})", "sin": "tl.sin({})", "cos": "tl.cos({})",
                     "softplus": "(tl.maximum({0}, 0.0) + tl.log(1.0 + tl.exp(-tl.abs({0}))))",
                     "floor": "tl.floor({})", "ceil": "tl.ceil({})"}
            return table[name].format(x)
        if self.lang == "cpp" and name in ("exp", "log", "log1p", "tanh", "sigmoid", "erf",
                                           "softplus", "sqrt"):
            helper = "v" + name
            self.used.update([*with_dependencies(helper), "simd_function"])
            return f"{helper}({x})"
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
        if fn == "eq":        # 1 where equal, else 0 (feeds first_index, never an output)
            return sel(f"{args[0]} == {args[1]}", L(1), L(0))
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

    def clamp06(self, x: str) -> str:
        low = self.select(f"({x}) < {self.lit(0)}", self.lit(0), f"({x})")
        return self.select(f"{low} > {self.lit(6)}", self.lit(6), low)

    def power(self, base: str, exponent: str, attrs: dict) -> str:
        value = attrs.get("exponent_value")
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
        if self.lang == "triton":
            return f"tl.exp({exponent} * tl.log({base}))"   # valid for positive bases
        return f"std::pow({base}, {exponent})"
