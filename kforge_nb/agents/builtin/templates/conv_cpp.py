"""The C++ convolution: direct loops, one output row (n, c_out, od, oh) per OpenMP task.

A task sets its row to the bias, then for each input channel of its group and each tap of the
window adds weight x input along the row in one branch-free simd loop over the range of
positions the tap keeps inside the input. A plain conv reads input position
ow*s - p + kw*d for ow in range; a transposed one, gathered along D and H, walks the input
row instead and adds into output position iw*s - p + kw*d (distinct for distinct iw, so the
loop still vectorises, and the row is the task's own). Float accumulators, strict IEEE.
"""
from __future__ import annotations

from . import Written
from .conv_shape import launcher_head, settings, what


def axis(w: dict, i: int, indent: str) -> list[str]:
    """Lines finding input position z<axis> for output o<axis> at tap t<axis> along D or H,
    `continue` when there is none."""
    name, size = "dh"[i], "DH"[i]
    o, tap = f"o{name}", f"k{name}"
    if i < 3 - w["dims"]:
        return [f"{indent}const int64_t z{name} = {o};"]
    s, p, d = w["s"][i], w["p"][i], w["d"][i]
    if not w["transposed"]:
        return [f"{indent}const int64_t z{name} = {o} * {s} - {p} + {tap} * {d};",
                f"{indent}if (z{name} < 0 || z{name} >= {size}) continue;"]
    return [f"{indent}const int64_t t{name} = {o} + {p} - {tap} * {d};",
            f"{indent}if (t{name} < 0 || t{name} % {s} != 0 || t{name} / {s} >= {size}) continue;",
            f"{indent}const int64_t z{name} = t{name} / {s};"]


def row_lines(w: dict, indent: str) -> list[str]:
    """The simd loop along W for one tap: the range of the walked index (ow for a conv, iw
    for a transposed conv) whose partner position 'walked * s - p + kw * d' is in range."""
    s, p, d = w["s"][2], w["p"][2], w["d"][2]
    walked, partner, size = ("iw", "OW", "W") if w["transposed"] else ("ow", "W", "OW")
    shift = f"kw * {d} - {p}"
    # walked * s + shift in [0, partner): walked in [ceil(-shift / s), floor((partner - 1
    # - shift) / s)], the divisions rounding toward -inf (the numerators can be negative)
    lines = [f"{indent}const int64_t shift = {shift};",
             f"{indent}const int64_t lo = std::max<int64_t>(0, floor_div(-shift + {s} - 1, {s}));",
             f"{indent}const int64_t hi = std::min<int64_t>({size}, "
             f"floor_div({partner} - 1 - shift, {s}) + 1);",
             f"{indent}#pragma omp simd"]
    if w["transposed"]:
        lines += [f"{indent}for (int64_t iw = lo; iw < hi; ++iw) "
                  f"o[iw * {s} + shift] += wv * xr[iw];"]
    else:
        lines += [f"{indent}for (int64_t ow = lo; ow < hi; ++ow) "
                  f"o[ow] += wv * xr[ow * {s} + shift];"]
    return lines


def write(node, name: str, function: str, options) -> Written:
    w = settings(node)
    kd, kh, kw = w["k"]
    vol, g = kd * kh * kw, w["groups"]
    bias = "const float* b, " if w["bias"] else ""
    weights = (f"w + ((grp * CIG + ci) * COG + co % COG) * {vol}" if w["transposed"] else
               f"w + (co * CIG + ci) * {vol}")
    body = [f'extern "C" void {name}(const float* x, const float* w, {bias}float* out, '
            "int64_t N, int64_t CIN, int64_t COUT, int64_t D, int64_t H, int64_t W, "
            "int64_t OD, int64_t OH, int64_t OW) {",
            "    // one output row (n, co, od, oh) per task: bias, then each tap of each input",
            "    // channel of the group added along the row",
            "    auto floor_div = [](int64_t a, int64_t b) { return a >= 0 ? a / b : "
            "-((-a + b - 1) / b); };",
            f"    const int64_t CIG = CIN / {g}, COG = COUT / {g};",
            "    #pragma omp parallel for collapse(4) schedule(static)",
            "    for (int64_t n = 0; n < N; ++n) {",
            "      for (int64_t co = 0; co < COUT; ++co) {",
            "        for (int64_t od = 0; od < OD; ++od) {",
            "          for (int64_t oh = 0; oh < OH; ++oh) {",
            "            float* o = out + ((n * COUT + co) * OD + od) * OH * OW + oh * OW;",
            f"            const float start = {'b[co]' if w['bias'] else '0.0f'};",
            "            for (int64_t ow = 0; ow < OW; ++ow) o[ow] = start;",
            "            const int64_t grp = co / COG;",
            "            for (int64_t ci = 0; ci < CIG; ++ci) {",
            "              const float* xc = x + (n * CIN + grp * CIG + ci) * D * H * W;",
            f"              const float* wc = {weights};",
            f"              for (int64_t kd = 0; kd < {kd}; ++kd) {{",
            *axis(w, 0, "                "),
            f"                for (int64_t kh = 0; kh < {kh}; ++kh) {{",
            *axis(w, 1, "                  "),
            "                  const float* xr = xc + (zd * H + zh) * W;",
            f"                  for (int64_t kw = 0; kw < {kw}; ++kw) {{",
            f"                    const float wv = wc[(kd * {kh} + kh) * {kw} + kw];",
            *row_lines(w, "                    "),
            "                  }", "                }", "              }", "            }",
            "          }", "        }", "      }", "    }", "}"]
    how = "direct loops, one output row per task, a simd loop along the row for each tap"
    call = ["    if out.numel():",
            f"        kernels.{name}(x, weight, {'bias, ' if w['bias'] else ''}out, N, CIN, "
            "COUT, D, H, W, OD, OH, OW)"]
    launcher = launcher_head(function, w, name, how) + call + ["    return out"]
    return Written("\n".join(body), launcher, list(node.args), [node], what(w, how),
                   openmp=True)
