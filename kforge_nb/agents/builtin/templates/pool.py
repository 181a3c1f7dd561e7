"""Max and average pooling, 1-d to 3-d, as one kernel per call (Triton and C++).

Every pool is written as a 3-d pool over [rows, D, H, W] (a 1-d pool has D = H = 1): one
output element per (row, od, oh, ow), its window walked in a loop the compiler unrolls (the
window's sizes, strides, padding and dilation are constants of the kernel). Padding never
wins a max (torch's -inf padding) and counts toward an average's divisor only with
count_include_pad, clipped the way torch clips a window that ceil_mode lets hang off the end.
NaN propagates through a max, as in torch.
"""
from __future__ import annotations

from . import Written

PAD_MAX = "float('-inf')"


def settings(node) -> dict:
    """The window in 3-d form (leading 1s for the dims the pool does not have)."""
    p = node.attrs["params"]
    pad = lambda t, fill: (fill,) * (3 - p["dims"]) + tuple(t)
    return {"kind": p["kind"], "dims": p["dims"], "k": pad(p["kernel"], 1),
            "s": pad(p["stride"], 1), "p": pad(p["padding"], 0), "d": pad(p["dilation"], 1),
            "ceil": p["ceil_mode"], "count_pad": p["count_include_pad"],
            "divisor": p["divisor_override"]}


def size_lines(w: dict) -> list[str]:
    """Python lines of the launcher computing the output's spatial sizes as torch does."""
    lines = [f"    dims = {w['dims']}",
             "    D, H, W = (1,) * (3 - dims) + tuple(x.shape[-dims:])",
             "    rows = x.numel() // (D * H * W)",
             "    sizes = []",
             f"    for n, k, s, p, d in zip((D, H, W), {w['k']}, {w['s']}, {w['p']}, {w['d']}):",
             "        span = n + 2 * p - d * (k - 1) - 1",
             f"        o = (-(-span // s) if {w['ceil']} else span // s) + 1",
             f"        if {w['ceil']} and (o - 1) * s >= n + p:   # a window starting in the padding",
             "            o -= 1",
             "        sizes.append(o)",
             "    OD, OH, OW = sizes",
             "    out = torch.empty(tuple(x.shape[:-dims]) + tuple(sizes[3 - dims:]), "
             "dtype=x.dtype, device=x.device)"]
    return lines


def what(w: dict) -> str:
    window = "x".join(str(k) for k in w["k"][3 - w["dims"]:])
    return (f"{w['kind']} pool over a {window} window in one pass: each output reads its "
            "window once")


# -- Triton ---------------------------------------------------------------------------------------
def triton(node, name: str, function: str, options) -> Written:
    w = settings(node)
    is_max = w["kind"] == "max"
    lines = ["@triton.jit",
             f"def {name}(x_ptr, out_ptr, total, D, H, W, OD, OH, OW, BLOCK: tl.constexpr):",
             f"    # one output element per lane: its {w['kind']} over the window",
             "    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
             "    mask = offs < total",
             "    ow = offs % OW",
             "    oh = (offs // OW) % OH",
             "    od = (offs // (OW * OH)) % OD",
             "    row = offs // (OW * OH * OD)",
             "    base = row * D * H * W",
             "    acc = tl.full((BLOCK,), float('-inf'), tl.float32)" if is_max else
             "    acc = tl.zeros((BLOCK,), tl.float32)"]
    if not is_max and not w["count_pad"] and w["divisor"] is None:
        lines.append("    count = tl.zeros((BLOCK,), tl.float32)")
    (kd, kh, kw), (sd, sh, sw), (pd, ph, pw), (dd, dh, dw) = w["k"], w["s"], w["p"], w["d"]
    lines += [f"    for i in tl.static_range({kd}):",
              f"        zd = od * {sd} - {pd} + i * {dd}",
              f"        for j in tl.static_range({kh}):",
              f"            zh = oh * {sh} - {ph} + j * {dh}",
              f"            for k in tl.static_range({kw}):",
              f"                zw = ow * {sw} - {pw} + k * {dw}",
              "                ok = mask & (zd >= 0) & (zd < D) & (zh >= 0) & (zh < H) & "
              "(zw >= 0) & (zw < W)",
              "                v = tl.load(x_ptr + base + (zd * H + zh) * W + zw, mask=ok, "
              f"other={PAD_MAX if is_max else '0.0'})"]
    if is_max:
        lines.append("                acc = tl.where((v > acc) | (v != v), v, acc)   # NaN wins")
    else:
        lines.append("                acc += v")
        if not w["count_pad"] and w["divisor"] is None:
            lines.append("                count += ok.to(tl.float32)")
    if not is_max:
        lines.append(f"    acc = acc / {divisor_expr(w, 'tl.minimum', 'tl.maximum')}")
    lines.append("    tl.store(out_ptr + offs, acc, mask=mask)")
    launcher = [f"def {function}(x):",
                f'    """Runs {name}: {what(w)}."""',
                "    x = x.contiguous()"] + size_lines(w) + [
                "    total = out.numel()",
                "    if total:",
                "        BLOCK = 256",
                f"        {name}[(triton.cdiv(total, BLOCK),)](x, out, total, D, H, W, OD, OH, "
                "OW, BLOCK=BLOCK)",
                "    return out"]
    return Written("\n".join(lines), launcher, [node.args[0]], [node], what(w))


def divisor_expr(w: dict, lo: str, hi: str) -> str:
    """The average's divisor as torch computes it (a C++ or Triton expression)."""
    if w["divisor"] is not None:
        return f"{float(w['divisor'])}"
    if not w["count_pad"]:
        return "count" if lo.startswith("tl") else "(float)count"
    parts = []
    for axis, size, (k, s, p) in zip("dhw", ("D", "H", "W"), zip(w["k"], w["s"], w["p"])):
        start = f"(o{axis} * {s} - {p})"
        parts.append(f"({lo}({start} + {k}, {size} + {p}) - {start})")
    cast = ".to(tl.float32)" if lo.startswith("tl") else ""
    return "(" + " * ".join(parts) + ")" + cast if cast else "(float)(" + " * ".join(parts) + ")"


# -- C++ -----------------------------------------------------------------------------------------
def cpp(node, name: str, function: str, options) -> Written:
    w = settings(node)
    is_max = w["kind"] == "max"
    (kd, kh, kw), (sd, sh, sw), (pd, ph, pw), (dd, dh, dw) = w["k"], w["s"], w["p"], w["d"]
    counting = not is_max and not w["count_pad"] and w["divisor"] is None
    body = [f'extern "C" void {name}(const float* x, float* out, int64_t rows, int64_t D, '
            "int64_t H, int64_t W, int64_t OD, int64_t OH, int64_t OW) {",
            f"    // one output element per iteration: its {w['kind']} over the window",
            "    #pragma omp parallel for collapse(2) schedule(static)",
            "    for (int64_t row = 0; row < rows; ++row) {",
            "        for (int64_t od = 0; od < OD; ++od) {",
            "            const float* xr = x + row * D * H * W;",
            "            for (int64_t oh = 0; oh < OH; ++oh) {",
            "                for (int64_t ow = 0; ow < OW; ++ow) {",
            "                    float acc = " + ("-INFINITY;" if is_max else "0.0f;")]
    if counting:
        body.append("                    int64_t count = 0;")
    body += [f"                    for (int64_t i = 0; i < {kd}; ++i) {{",
             f"                        int64_t zd = od * {sd} - {pd} + i * {dd};",
             "                        if (zd < 0 || zd >= D) continue;",
             f"                        for (int64_t j = 0; j < {kh}; ++j) {{",
             f"                            int64_t zh = oh * {sh} - {ph} + j * {dh};",
             "                            if (zh < 0 || zh >= H) continue;",
             f"                            for (int64_t k = 0; k < {kw}; ++k) {{",
             f"                                int64_t zw = ow * {sw} - {pw} + k * {dw};",
             "                                if (zw < 0 || zw >= W) continue;",
             "                                float v = xr[(zd * H + zh) * W + zw];"]
    if is_max:
        body.append("                                if (v > acc || std::isnan(v)) acc = v;")
    else:
        body.append("                                acc += v;")
        if counting:
            body.append("                                ++count;")
    body += ["                            }", "                        }", "                    }"]
    if not is_max:
        body.append(f"                    acc /= {divisor_expr(w, 'std::min', 'std::max')};")
    body += ["                    out[((row * OD + od) * OH + oh) * OW + ow] = acc;",
             "                }", "            }", "        }", "    }", "}"]
    launcher = [f"def {function}(x):",
                f'    """Runs {name}: {what(w)}."""',
                "    x = x.contiguous()"] + size_lines(w) + [
                "    if out.numel():",
                f"        kernels.{name}(x, out, rows, D, H, W, OD, OH, OW)",
                "    return out"]
    return Written("\n".join(body), launcher, [node.args[0]], [node], what(w), openmp=True)
