"""Vectorisable float maths for the C++ target: no libm call in a hot loop.

GCC calls libm one element at a time unless -ffast-math is on (which we may not use: it
changes NaN and infinity handling), so a loop around std::exp is not vectorised. Each function
here is a branch-free body (selects, not ifs) `NAME_inline`, and `vNAME` is what the kernels
call; all are forced inline, so GCC vectorises the loop around them like any arithmetic.

Why inline and not OpenMP "declare simd" functions (the first design): a loop's remainder
(31 = 16 + 15 elements) then calls the scalar version once per element, and a declare-simd
function calling another one runs lane by lane. Measured on a 2-core EPYC, one thread: a fused
GroupNorm over [16, 128, 14, 14] 32.9 ms -> 4.6 ms, log(|x| + 1) summed over 2048-long rows
0.34 -> 0.31 ms, LayerNorm over 31-long rows 8.7 -> 7.2 ms. tests/test_cpp_math.py compiles
every function in a loop and checks the loop calls nothing. Accuracy is within a few ulp of
libm, far inside the evaluator's 1e-4 tolerance.
"""
from __future__ import annotations

SIMD_MACRO = r"""
// The math helpers below are branch-free (selects, not ifs) and forced inline, so the loops
// that use them vectorise whole, remainders included, with no call to libm or to a helper.
#define MATH_INLINE static inline __attribute__((always_inline))
"""

WHERE = r"""
// where(c, a, b): both a and b are computed before the choice (a select, not a branch).
static inline float where(bool c, float a, float b) {
    return c ? a : b;
}
"""

# name -> (body defining NAME_inline, arity); bodies may call the bodies listed in DEPENDS
BODIES = {
    "exp": (r"""
// exp(x): x = k*ln2 + r with |r| <= ln2/2 (ln2 split in two parts for accuracy), a degree-6
// polynomial for e^r (Cephes), then 2^k applied as two factors 2^(k/2) built in the exponent
// bits (so results near FLT_MAX and subnormal results stay right); overflow by selects.
MATH_INLINE float exp_inline(float x) {
    float c = x < -104.0f ? -104.0f : x;                   // keeps k in int range
    c = c > 89.0f ? 89.0f : c;
    const float k = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round(x/ln2)
    float r = std::fma(k, -0.693359375f, c);
    r = std::fma(k, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = std::fma(p, r, 1.3981999507e-3f);
    p = std::fma(p, r, 8.3334519073e-3f);
    p = std::fma(p, r, 4.1665795894e-2f);
    p = std::fma(p, r, 1.6666665459e-1f);
    p = std::fma(p, r, 5.0000001201e-1f);
    p = std::fma(p, r * r, r + 1.0f);
    const int32_t k_int = (int32_t)k;
    const int32_t half = k_int >> 1;
    const float scale_a = __builtin_bit_cast(float, (half + 127) << 23);
    const float scale_b = __builtin_bit_cast(float, (k_int - half + 127) << 23);
    float y = (p * scale_a) * scale_b;
    y = x > 88.72283935546875f ? INFINITY : y;
    y = x < -103.972084045410f ? 0.0f : y;
    return x != x ? x : y;
}
""", 1),
    "log_unit": (r"""
// log(u) for finite u > 0: u = m * 2^e with m in [sqrt(1/2), sqrt(2)), a Cephes polynomial
// for log(m), then e*ln2 added in two parts.
MATH_INLINE float log_unit_inline(float u) {
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
""", 1),
    "log": (r"""
// log(x): the unit body, with zero, negative, infinite and NaN inputs handled by selects.
// Subnormal inputs are scaled by 2^23 first (their exponent bits are zero).
MATH_INLINE float log_inline(float x) {
    const bool tiny = x < 1.17549435e-38f;
    float y = log_unit_inline(tiny ? x * 8388608.0f : x) - (tiny ? 15.9423851528f : 0.0f);
    y = x == 0.0f ? -INFINITY : y;
    y = x < 0.0f ? NAN : y;
    y = x == INFINITY ? INFINITY : y;
    return x != x ? x : y;
}
""", 1),
    "log1p": (r"""
// log(1 + x) that stays accurate for tiny x: log(u) * x / (u - 1) with u = 1 + x (Goldberg).
MATH_INLINE float log1p_inline(float x) {
    const float u = 1.0f + x;
    const float y = log_inline(u) * (x / (u - 1.0f));
    return u == 1.0f ? x : (u == INFINITY ? INFINITY : y);
}
""", 1),
    "softplus": (r"""
// log(1 + exp(x)) as max(x, 0) + log(1 + exp(-|x|)): the exp cannot overflow and the log's
// argument stays in [1, 2], so no special cases are needed.
MATH_INLINE float softplus_inline(float x) {
    const float positive = x > 0.0f ? x : 0.0f;
    const float y = positive + log_unit_inline(1.0f + exp_inline(-std::fabs(x)));
    return x != x ? x : y;
}
""", 1),
    "tanh": (r"""
// tanh(x) = 1 - 2 / (exp(2x) + 1), exact limits at +-infinity; below |x| = 0.1 the odd series
// x - x^3/3 + 2x^5/15 - 17x^7/315 instead (the formula is only absolutely accurate there, and
// a square root after tanh turns 1e-7 absolute into 1e-4).
MATH_INLINE float tanh_inline(float x) {
    const float x2 = x * x;
    const float series = x * std::fma(x2, std::fma(x2, std::fma(x2, -0.053968254f,
                                                                 0.133333333f), -0.333333333f),
                                      1.0f);
    const float formula = 1.0f - 2.0f / (exp_inline(2.0f * x) + 1.0f);
    return std::fabs(x) < 0.1f ? series : formula;
}
""", 1),
    "sigmoid": (r"""
MATH_INLINE float sigmoid_inline(float x) {
    return 1.0f / (1.0f + exp_inline(-x));
}
""", 1),
    "erf": (r"""
// erf(x): for |x| < 1 Cephes' odd polynomial x * T(x^2) (relative error ~1e-7, also for tiny
// x); beyond, Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7 where erf >= 0.84).
// Both are computed and one is selected, so the loop stays branch-free.
MATH_INLINE float erf_inline(float x) {
    const float a = std::fabs(x);
    const float z = x * x;
    float s = 7.853861353153693e-5f;
    s = std::fma(s, z, -8.010193625184903e-4f);
    s = std::fma(s, z, 5.188327685732524e-3f);
    s = std::fma(s, z, -2.685381193529856e-2f);
    s = std::fma(s, z, 1.128358514861418e-1f);
    s = std::fma(s, z, -3.761262582423300e-1f);
    s = std::fma(s, z, 1.128379165726710e0f);
    const float t = 1.0f / std::fma(0.3275911f, a, 1.0f);
    float p = 1.061405429f;
    p = std::fma(p, t, -1.453152027f);
    p = std::fma(p, t, 1.421413741f);
    p = std::fma(p, t, -0.284496736f);
    p = std::fma(p, t, 0.254829592f);
    float y = 1.0f - p * t * exp_inline(-a * a);
    y = x < 0.0f ? -y : y;
    return a < 1.0f ? x * s : y;
}
""", 1),
    "sqrt": (r"""
// sqrt(x): std::sqrt may set errno for x < 0, which stops GCC from vectorising a loop that
// calls it inline; inside a declare-simd wrapper it becomes one vsqrtps per 16 values.
MATH_INLINE float sqrt_inline(float x) {
    return std::sqrt(x);
}
""", 1),
    "sincos": (r"""
// sin(x) (cosine = false) or cos(x): Cephes sinf/cosf. x is reduced to |z| <= pi/4 by the
// nearest even multiple j of pi/4 (pi/4 in three parts), the octant picks the polynomial and
// the sign. Accurate to a few ulp for |x| < 8192; NaN and infinities give NaN.
MATH_INLINE float sincos_inline(float x, float cosine) {
    const float a = std::fabs(x);
    float j = std::floor(a * 1.27323954473516f);
    j = j + (j - 2.0f * std::floor(j * 0.5f));          // round up to even
    const float z = ((a - j * 0.78515625f) - j * 2.4187564849853515625e-4f)
                    - j * 3.77489497744594108e-8f;
    float octant = j + 2.0f * cosine;                   // cos(x) = sin(x + pi/2)
    octant = octant - 8.0f * std::floor(octant * 0.125f);   // mod 8: one of 0, 2, 4, 6
    const float zz = z * z;
    const float s = std::fma(std::fma(std::fma(-1.9515295891e-4f, zz, 8.3321608736e-3f), zz,
                                      -1.6666654611e-1f) * zz, z, z);
    const float c = std::fma(std::fma(std::fma(2.443315711809948e-5f, zz,
                                               -1.388731625493765e-3f), zz,
                                      4.166664568298827e-2f) * zz, zz, std::fma(-0.5f, zz, 1.0f));
    float y = (octant == 2.0f || octant == 6.0f) ? c : s;
    y = octant >= 4.0f ? -y : y;
    y = (cosine == 0.0f && x < 0.0f) ? -y : y;          // sin is odd, cos is even
    return a == INFINITY ? NAN : (x != x ? x : y);
}
""", 1),
    "sin": (r"""
MATH_INLINE float sin_inline(float x) {
    return sincos_inline(x, 0.0f);
}
""", 1),
    "cos": (r"""
MATH_INLINE float cos_inline(float x) {
    return sincos_inline(x, 1.0f);
}
""", 1),
    "pow": (r"""
// pow(x, y) = exp(y * log|x|), with torch's signs and special cases: a negative base gives NaN
// unless y is an integer (then the sign of (-1)^y), pow(x, 0) = 1, pow(1, y) = 1. Written with
// few selects: a longer chain of them kept GCC from vectorising the loop.
MATH_INLINE float pow_inline(float x, float y) {
    float r = exp_inline(y * log_inline(std::fabs(x)));    // |x|^y, 0 and inf at |x| = 0
    const float half = y * 0.5f;
    const bool integer = std::floor(y) == y;
    const bool odd = integer & (std::floor(half) != half);
    r = (x < 0.0f) & !integer ? NAN : r;
    r = odd ? std::copysign(r, x) : r;                      // (-x)^odd = -(x^odd), -0 too
    return (y == 0.0f) | (x == 1.0f) ? 1.0f : r;
}
""", 2),
}
DEPENDS = {"log": ["log_unit"], "log1p": ["log"], "softplus": ["exp", "log_unit"],
           "tanh": ["exp"], "sigmoid": ["exp"], "erf": ["exp"], "sin": ["sincos"],
           "cos": ["sincos"], "pow": ["exp", "log"]}
FUNCTIONS = tuple(name for name in BODIES if name not in ("log_unit", "sincos"))


def closure(names) -> list[str]:
    """The bodies `names` need, dependencies first, in BODIES' order."""
    needed: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name not in needed:
            needed.add(name)
            todo += DEPENDS.get(name, [])
    return [name for name in BODIES if name in needed]


def wrapper(name: str) -> str:
    params = ["x", "y"][:BODIES[name][1]]
    signature = ", ".join(f"float {p}" for p in params)
    return (f"MATH_INLINE float v{name}({signature}) {{\n"
            f"    return {name}_inline({', '.join(params)});\n}}\n")


# bf16 / fp16 values travel as their 16 bits (uint16_t): `NAME_load` reads them as float,
# `NAME_round` rounds a float to the nearest NAME (ties to even, as torch rounds each op's
# result), `NAME_bits` gives the bits to store. fp16 converts through GCC's _Float16 (F16C
# instructions where -march=native has them).
STORAGE = {
    "bf16": r"""
MATH_INLINE float bf16_load(uint16_t bits) {
    return __builtin_bit_cast(float, (uint32_t)bits << 16);
}
// add half an ulp of bf16 (less one, plus the last kept bit: ties to even), drop 16 bits;
// NaN is torch's quiet NaN
MATH_INLINE uint16_t bf16_bits(float x) {
    const uint32_t u = __builtin_bit_cast(uint32_t, x);
    const uint16_t rounded = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
    return x != x ? (uint16_t)0x7FC0u : rounded;
}
MATH_INLINE float bf16_round(float x) {
    return bf16_load(bf16_bits(x));
}
""",
    "fp16": r"""
MATH_INLINE float fp16_load(uint16_t bits) {
    return (float)__builtin_bit_cast(_Float16, bits);
}
MATH_INLINE uint16_t fp16_bits(float x) {
    return __builtin_bit_cast(uint16_t, (_Float16)x);
}
MATH_INLINE float fp16_round(float x) {
    return (float)(_Float16)x;
}
""",
}


def helpers_source(used: set[str]) -> str:
    """The helper text for the functions a translation unit calls (`where`, math names and the
    bf16 / fp16 conversions)."""
    math_used = sorted(n for n in used if n in BODIES)
    storage = [k for k in STORAGE if any(n.startswith(k + "_") for n in used)]
    parts = [WHERE.strip("\n") + "\n"] if "where" in used else []
    if math_used or storage:
        parts.append(SIMD_MACRO.strip("\n") + "\n")
    parts += [STORAGE[k].strip("\n") + "\n" for k in storage]
    if math_used:
        parts += [BODIES[n][0].strip("\n") + "\n" for n in closure(math_used)]
        parts += [wrapper(n) for n in FUNCTIONS if n in math_used]
    return "\n".join(parts)
