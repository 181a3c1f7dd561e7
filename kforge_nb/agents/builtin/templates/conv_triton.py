"""The Triton convolution: an implicit GEMM, or a direct kernel when each output reads one
input channel (depthwise).

Implicit GEMM: rows are output positions (n, od, oh, ow), columns the output channels of one
group (the grid's third axis), K the group's input channels times the kernel window. Each
K slice gathers its [rows, K] tile of the input (masked where the window falls in the padding,
or, transposed, where no input position maps to the output) and multiplies it with the
[K, columns] tile of the weight by tl.dot, at the precision the policy allows. Offsets into
the input and output are int64: a KernelBench activation passes 2^31 elements.
"""
from __future__ import annotations

import textwrap
from types import SimpleNamespace

from . import Written, conv_phases as phases
from .conv_shape import launcher_head, settings, volume, what
from ..triton.gemm import TritonGemm

# (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps) the autotuner tries on a GPU
IEEE_CONFIGS = [(64, 64, 32, 3, 4), (128, 64, 32, 3, 4), (64, 32, 32, 3, 4),
                (128, 128, 32, 3, 8)]
TENSOR_CORE_CONFIGS = [(128, 128, 32, 3, 8), (128, 64, 32, 3, 4), (64, 64, 32, 4, 4),
                       (64, 32, 32, 4, 4)]
DIRECT_WINDOW = 64        # the direct kernel unrolls its window: at most this many taps
DIRECT_BLOCK = 256        # outputs per program of the direct kernel


def axis(w: dict, i: int, out: str, tap: str, indent: str) -> tuple[list[str], str | None]:
    """Lines computing the input position z<axis> that output `out` reads at window tap
    `tap` along axis i (0: D, 1: H, 2: W), and the mask saying it exists (None: always)."""
    name, size = "dhw"[i], "DHW"[i]
    if i < 3 - w["dims"]:
        return [f"{indent}z{name} = {out}"], None           # a dim the conv does not have (0)
    s, p, d = w["s"][i], w["p"][i], w["d"][i]
    if not w["transposed"]:
        return [f"{indent}z{name} = {out} * {s} - {p} + {tap} * {d}"], \
            f"(z{name} >= 0) & (z{name} < {size})"
    lines = [f"{indent}t{name} = {out} + {p} - {tap} * {d}"]
    if s == 1:
        return lines + [f"{indent}z{name} = t{name}"], f"(z{name} >= 0) & (z{name} < {size})"
    # an input position maps here only where the division is exact (t >= 0 is tested first)
    return lines + [f"{indent}z{name} = t{name} // {s}"], \
        f"(t{name} >= 0) & (t{name} % {s} == 0) & (z{name} < {size})"


def window(w: dict, outs: tuple[str, str, str], taps: tuple[str, str, str],
           indent: str) -> tuple[list[str], list[str]]:
    lines, masks = [], []
    for i in range(3):
        more, mask = axis(w, i, outs[i], taps[i], indent)
        lines += more
        masks += [mask] if mask else []
    return lines, masks


def product_lines(o, indent: str) -> list[str]:
    """The GEMM's `acc = a @ b + acc` at the policy's precision (triton/gemm.py), at `indent`."""
    lines = TritonGemm.product(SimpleNamespace(o=o))
    return textwrap.indent(textwrap.dedent("\n".join(lines)), indent).splitlines()


def position_lines(offs: str, indent: str = "    ") -> list[str]:
    return [f"{indent}ow = {offs} % OW",
            f"{indent}oh = ({offs} // OW) % OH",
            f"{indent}od = ({offs} // (OW * OH)) % OD"]


def write(node, name: str, function: str, options) -> Written:
    w = settings(node)
    direct = w["cig"] == 1 and volume(w) <= DIRECT_WINDOW
    kernel, call, how = direct_kernel(w, name) if direct else gemm_kernel(w, name, options)
    launcher = launcher_head(function, w, name, how) + call + ["    return out"]
    return Written(kernel, launcher, list(node.args), [node], what(w, how))


# -- the implicit GEMM -----------------------------------------------------------------------------
def gemm_kernel(w: dict, name: str, o) -> tuple[str, list[str], str]:
    kd, kh, kw = w["k"]
    bias = ["b_ptr"] if w["bias"] else []
    bf16 = o.dot == "bf16"
    ph = phases.phased(w)
    params = ["x_ptr", "w_ptr", *bias, "out_ptr", "M", "CIG", "COG", "K", "CIN", "COUT", "D",
              "H", "W", "OD", "OH", "OW", *(["QD", "QH", "QW"] if ph else []),
              "BLOCK_M: tl.constexpr", "BLOCK_N: tl.constexpr", "BLOCK_K: tl.constexpr"] + \
        (["INTERPRETER: tl.constexpr"] if bf16 else [])
    lines = ["@triton.jit",
             f"def {name}({', '.join(params)}):",
             "    # implicit GEMM: rows are output positions (n, od, oh, ow), columns the output",
             "    # channels of group g, K the group's input channels x the kernel window",
             "    g = tl.program_id(2)",
             "    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)"]
    lines += phases.row_lines(w) if ph else [
        "    offs_m = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)",
        *position_lines("offs_m"),
        "    n = offs_m // (OW * OH * OD)",
        "    m_ok = offs_m < M"]
    lines += ["    n_ok = offs_n < COG",
              "    co = (g * COG + offs_n).to(tl.int64)",
              "    x_rows = (n * CIN + g * CIG) * (D * H * W)",
              "    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
              *(phases.count_lines(w) if ph else []),
              f"    for k0 in range(0, {'KP' if ph else 'K'}, BLOCK_K):",
              "        offs_k = k0 + tl.arange(0, BLOCK_K)",
              f"        k_ok = offs_k < {'KP' if ph else 'K'}"]
    more, masks = phases.tap_lines(w) if ph else plain_taps(w)
    lines += more + [
        f"        ok = {' & '.join(['m_ok[:, None]', 'k_ok[None, :]'] + masks)}",
        "        a = tl.load(x_ptr + x_rows[:, None] + ci[None, :].to(tl.int64) * (D * H * W) + "
        "(zd * H + zh) * W + zw, mask=ok, other=0.0)"]
    if w["transposed"]:      # weight [C_in, C_out/g, window]
        lines.append("        b = tl.load(w_ptr + ((g * CIG + ci[:, None]).to(tl.int64) * COG + "
                     f"offs_n[None, :]) * {kd * kh * kw} + r[:, None], "
                     "mask=k_ok[:, None] & n_ok[None, :], other=0.0)")
    else:                    # weight [C_out, C_in/g, window]: row co is K contiguous values
        lines.append("        b = tl.load(w_ptr + co[None, :] * K + offs_k[:, None], "
                     "mask=k_ok[:, None] & n_ok[None, :], other=0.0)")
    lines += product_lines(o, "        ")
    if w["bias"]:
        lines.append("    acc += tl.load(b_ptr + co, mask=n_ok, other=0.0)[None, :]")
    lines += ["    spatial = OD * OH * OW",
              "    out_offs = n[:, None] * COUT * spatial + co[None, :] * spatial + "
              "((od * OH + oh) * OW + ow)[:, None]",
              "    tl.store(out_ptr + out_offs, acc, mask=m_ok[:, None] & n_ok[None, :])"]
    lines += autotune_lines(name, o)
    call = gemm_call(w, name, o)
    how = "an implicit GEMM (output positions x output channels, tl.dot over in-channels x window)"
    return "\n".join(lines), call, how


def plain_taps(w: dict) -> tuple[list[str], list[str]]:
    """In the K loop: the slice's channel and window tap, the input position each row reads
    and the masks saying it exists."""
    kd, kh, kw = w["k"]
    lines = [f"        ci = offs_k // {kd * kh * kw}",
             f"        r = offs_k % {kd * kh * kw}   # the tap: (kd, kh, kw) of the window"]
    lines += [line for dims, line in ((3, f"        kd = r // {kh * kw}"),
                                      (2, f"        kh = (r // {kw}) % {kh}"),
                                      (1, f"        kw = r % {kw}")) if w["dims"] >= dims]
    more, masks = window(w, ("od[:, None]", "oh[:, None]", "ow[:, None]"),
                         ("kd[None, :]", "kh[None, :]", "kw[None, :]"), "        ")
    return lines + more, masks


def autotune_lines(name: str, o) -> list[str]:
    configs = IEEE_CONFIGS if o.dot in ("ieee", "fma") else TENSOR_CORE_CONFIGS
    listed = ",\n        ".join(
        f"triton.Config({{'BLOCK_M': {m}, 'BLOCK_N': {n}, 'BLOCK_K': {k}}}, num_stages={s}, "
        f"num_warps={nw})" for m, n, k, s, nw in configs)
    return ["", "", "# On a GPU the autotuner times these tiles the first time a shape is "
            "seen; under the", "# CPU interpreter the launcher passes fixed tiles instead.",
            "if torch.cuda.is_available():",
            f"    {name} = triton.autotune(configs=[\n        {listed},\n    ], "
            f"key=['M', 'COG', 'K'])({name})"]


def gemm_call(w: dict, name: str, o) -> list[str]:
    """The launcher's lines after the sizes: the GEMM's shape, its grid, the launch."""
    vol = volume(w)
    bias_arg = "bias, " if w["bias"] else ""
    extra = ", INTERPRETER=__import__('os').environ.get('TRITON_INTERPRET') == '1'" \
        if o.dot == "bf16" else ""
    ph = phases.phased(w)
    grid = phases.launch_lines(w) if ph else [
        "    M = N * OD * OH * OW",
        "    grid = lambda meta: (triton.cdiv(M, meta['BLOCK_M']), "
        "triton.cdiv(COG, meta['BLOCK_N']), G)"]
    return [f"    G = {w['groups']}",
            "    CIG, COG = CIN // G, COUT // G",
            f"    K = CIG * {vol}", *grid,
            "    if M and COG:",
            f"        tiles = {{}} if torch.cuda.is_available() else dict(BLOCK_M={o.block_m}, "
            f"BLOCK_N=min({o.block_n}, max(16, triton.next_power_of_2(COG))), "
            f"BLOCK_K=min({o.block_k}, max(16, triton.next_power_of_2(K))))",
            f"        {name}[grid](x, weight, {bias_arg}out, M, CIG, COG, K, CIN, COUT, D, H, W, "
            f"OD, OH, OW{', QD, QH, QW' if ph else ''}{extra}, **tiles)"]


# -- the direct kernel (one input channel per output) ----------------------------------------------
def direct_kernel(w: dict, name: str) -> tuple[str, list[str], str]:
    kd, kh, kw = w["k"]
    bias = ["b_ptr"] if w["bias"] else []
    params = ["x_ptr", "w_ptr", *bias, "out_ptr", "total", "CIN", "COUT", "COG", "D", "H", "W",
              "OD", "OH", "OW", "BLOCK: tl.constexpr"]
    lines = ["@triton.jit",
             f"def {name}({', '.join(params)}):",
             "    # one output element per lane: its window over its one input channel",
             "    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
             "    mask = offs < total",
             *position_lines("offs"),
             "    c = (offs // (OW * OH * OD)) % COUT",
             "    n = offs // (OW * OH * OD * COUT)",
             "    x_base = (n * CIN + c // COG) * (D * H * W)",
             f"    w_base = c * {kd * kh * kw}",
             "    acc = tl.zeros((BLOCK,), tl.float32)",
             f"    for i in tl.static_range({kd}):",
             f"        for j in tl.static_range({kh}):",
             f"            for k in tl.static_range({kw}):"]
    more, masks = window(w, ("od", "oh", "ow"), ("i", "j", "k"), "                ")
    lines += more + [
        f"                ok = {' & '.join(['mask'] + masks)}",
        "                v = tl.load(x_ptr + x_base + (zd * H + zh) * W + zw, mask=ok, other=0.0)",
        f"                acc += v * tl.load(w_ptr + w_base + (i * {kh} + j) * {kw} + k, "
        "mask=mask, other=0.0)"]
    if w["bias"]:
        lines.append("    acc += tl.load(b_ptr + c, mask=mask, other=0.0)")
    lines.append("    tl.store(out_ptr + offs, acc, mask=mask)")
    bias_arg = "bias, " if w["bias"] else ""
    call = ["    total = out.numel()",
            "    if total:",
            f"        {name}[(triton.cdiv(total, {DIRECT_BLOCK}),)](x, weight, {bias_arg}out, "
            f"total, CIN, COUT, COUT // {w['groups']}, D, H, W, OD, OH, OW, "
            f"BLOCK={DIRECT_BLOCK})"]
    how = "a direct kernel, one output per lane over its window (one input channel each)"
    return "\n".join(lines), call, how
