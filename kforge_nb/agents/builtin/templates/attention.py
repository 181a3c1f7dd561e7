"""Scaled dot-product attention, softmax(q k^T * scale) v, as one kernel (Triton and C++).

Both targets walk the keys once with an online softmax (the FlashAttention recurrence): for
each block of keys the scores s are computed, the running maximum m moves to
m' = max(m, max(s)), the running sum and the output accumulator are rescaled by exp(m - m')
and the block's exp(s - m') is added in; the output is acc / l at the end. The scores never
exist as a [Lq, Lk] tensor, so q, k and v are each read once per query block and the output
written once.

Causal attention is torch's `is_causal`: the top-left lower triangle, query i sees the keys
j <= i (also when Lq != Lk); a query block stops at the last key any of its rows can see.
q is [..., Lq, E], k [..., Lk, E], v [..., Lk, Ev] with the same leading dims (masks,
dropout and GQA stay with the vendor: capture/ops_templates.py). Accumulators are fp32; the
scale is 1/sqrt(E) when the call gives none.
"""
from __future__ import annotations

from ..cpp.maths import FUNCTIONS
from ..elementwise import CppFormulas, StdFormulas
from . import Written

LOG2E = 1.4426950408889634      # exp(x) = 2^(x log2 e): folded into the scale once
KEY_BLOCK = 64                  # C++: keys scored before the accumulator is rescaled

# Triton on a GPU: (BLOCK_M, BLOCK_N, the most Ev columns a program owns, num_warps,
# num_stages). A program's accumulator is BLOCK_M x BLOCK_EV fp32 registers: wide value rows
# are split over programs (each recomputes its block's scores) or take few query rows. On an
# H100 at KernelBench's E = Ev = 1024 (strict fp32, 32 x 32 heads of 512): 16 rows x 1024
# took 196 ms, 32 x 256 312 ms, 64 x 64 658 ms; torch's kernel 24 ms, so there the race
# keeps the vendor's.
GPU_CONFIGS = [(64, 64, 64, 4, 2), (64, 32, 128, 4, 2), (32, 64, 128, 4, 2),
               (32, 64, 256, 4, 2), (16, 32, 1024, 8, 2), (128, 64, 64, 8, 2)]
GPU_E_CHUNK = 128               # the widest slice of E one score product takes
# Under the interpreter: small blocks, so the tests' odd sizes cross every block boundary
INTERPRETER_BLOCKS = {"BLOCK_M": 16, "BLOCK_N": 16, "E_CHUNK": 32, "EV_CHUNK": 32}


def settings(node) -> dict:
    p = node.attrs["params"]
    q, k, v = p["shapes"]
    return {"causal": p["causal"], "scale": p["scale"], "E": q[-1], "EV": v[-1]}


def scale_line(w: dict) -> str:
    """The launcher's line computing the scale as torch does (1/sqrt(E) when none is given)."""
    if w["scale"] is not None:
        return f"    scale = {float(w['scale'])!r}"
    return "    scale = 1.0 / math.sqrt(E)"


def what(w: dict) -> str:
    return (f"{'causal ' if w['causal'] else ''}attention in one pass over the keys (online "
            "softmax: running max and sum, the accumulator rescaled per key block); the "
            "scores never reach memory")


def shape_lines() -> list[str]:
    """The launcher's lines: [heads, L, E] views of q, k, v and the output."""
    return ["    Lq, E = q.shape[-2], q.shape[-1]",
            "    Lk, EV = k.shape[-2], v.shape[-1]",
            "    q3 = q.contiguous().reshape(-1, Lq, E)",
            "    k3 = k.contiguous().reshape(-1, Lk, E)",
            "    v3 = v.contiguous().reshape(-1, Lk, EV)",
            "    heads = q3.shape[0]",
            "    out = (torch.zeros if Lk == 0 else torch.empty)(tuple(q.shape[:-1]) + (EV,), "
            "dtype=q.dtype, device=q.device)"]


# -- Triton ---------------------------------------------------------------------------------------
def product(a: str, b: str, acc: str | None, dot: str) -> str:
    """A tile product in the options' precision (exact fp32 FMA products under strict)."""
    tail = f", {acc}" if acc else ""
    if dot in ("bf16", "fp16"):
        t = "tl.bfloat16" if dot == "bf16" else "tl.float16"
        return f"tl.dot({a}.to({t}), {b}.to({t}){tail})"
    if dot == "bf16-rounded":   # the interpreter multiplies bf16 tiles as integers
        return (f"tl.dot({a}.to(tl.bfloat16).to(tl.float32), {b}.to(tl.bfloat16)"
                f'.to(tl.float32){tail}, input_precision="ieee")')
    return f'tl.dot({a}, {b}{tail}, input_precision="{"tf32" if dot == "tf32" else "ieee"}")'


def product_lines(indent: str, target: str, a: str, b: str, acc: str | None,
                  dot: str) -> list[str]:
    if dot != "bf16":
        return [f"{indent}{target} = {product(a, b, acc, dot)}"]
    return [f"{indent}if INTERPRETER:",
            f"{indent}    {target} = {product(a, b, acc, 'bf16-rounded')}",
            f"{indent}else:",
            f"{indent}    {target} = {product(a, b, acc, 'bf16')}"]


def triton_kernel(name: str, causal: bool, dot: str) -> list[str]:
    # the scores go through exp, which turns their absolute error into the weights' relative
    # error: under a 16-bit policy they stay exact fp32 and only p @ v takes 16-bit tiles
    score_dot = "ieee" if dot in ("bf16", "fp16") else dot
    q_rows = "q_base + offs_m[:, None] * E + {e}[None, :]"
    q_mask = "row_ok[:, None] & ({e}[None, :] < E)"
    k_cols = "k_base + keys[None, :] * E + {e}[:, None]"
    k_mask = "key_ok[None, :] & ({e}[:, None] < E)"
    bf16 = ", INTERPRETER: tl.constexpr" if dot == "bf16" else ""
    lines = ["@triton.jit",
             f"def {name}(q_ptr, k_ptr, v_ptr, out_ptr, Lq, Lk, E, EV, qk_scale, "
             "BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_E: tl.constexpr, "
             f"BLOCK_EV: tl.constexpr, ONE_CHUNK: tl.constexpr{bf16}):",
             "    # BLOCK_M query rows of one head against all its keys, BLOCK_N keys at a time,",
             "    # for BLOCK_EV columns of the output; scores in base 2 (qk_scale holds log2 e)",
             "    start_m = tl.program_id(0) * BLOCK_M",
             "    head = tl.program_id(1).to(tl.int64)",
             "    offs_m = start_m + tl.arange(0, BLOCK_M)",
             "    offs_n = tl.arange(0, BLOCK_N)",
             "    offs_e = tl.arange(0, BLOCK_E)",
             "    offs_v = tl.program_id(2) * BLOCK_EV + tl.arange(0, BLOCK_EV)",
             "    q_base = q_ptr + head * Lq * E",
             "    k_base = k_ptr + head * Lk * E",
             "    v_base = v_ptr + head * Lk * EV",
             "    row_ok = offs_m < Lq",
             "    if ONE_CHUNK:   # E fits one block: the query rows stay in registers",
             f"        q = tl.load({q_rows.format(e='offs_e')}, mask={q_mask.format(e='offs_e')}, "
             "other=0.0)",
             "    m_i = tl.full((BLOCK_M,), float('-inf'), tl.float32)",
             "    l_i = tl.zeros((BLOCK_M,), tl.float32)",
             "    acc = tl.zeros((BLOCK_M, BLOCK_EV), tl.float32)",
             "    hi = tl.minimum(Lk, start_m + BLOCK_M)   # causal: no key past the last row"
             if causal else "    hi = Lk",
             "    for start_n in range(0, hi, BLOCK_N):",
             "        keys = start_n + offs_n",
             "        key_ok = keys < Lk",
             "        if ONE_CHUNK:",
             f"            k = tl.load({k_cols.format(e='offs_e')}, "
             f"mask={k_mask.format(e='offs_e')}, other=0.0)",
             *product_lines("            ", "s", "q", "k", None, score_dot),
             "        else:   # a wide E: the score product walks it in BLOCK_E slices",
             "            s = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)",
             "            for e0 in range(0, E, BLOCK_E):",
             "                es = e0 + offs_e",
             f"                qc = tl.load({q_rows.format(e='es')}, mask={q_mask.format(e='es')}, "
             "other=0.0)",
             f"                kc = tl.load({k_cols.format(e='es')}, mask={k_mask.format(e='es')}, "
             "other=0.0)",
             *product_lines("                ", "s", "qc", "kc", "s", score_dot),
             "        visible = key_ok[None, :] & (keys[None, :] <= offs_m[:, None])" if causal
             else "        visible = key_ok[None, :]",
             "        s = tl.where(visible, s * qk_scale, float('-inf'))",
             "        # key 0 is in every row's first block, so m_new is finite from there on",
             "        m_new = tl.maximum(m_i, tl.max(s, 1))",
             "        alpha = tl.exp2(m_i - m_new)",
             "        p = tl.exp2(s - m_new[:, None])",
             "        l_i = l_i * alpha + tl.sum(p, 1)",
             "        v = tl.load(v_base + keys[:, None] * EV + offs_v[None, :], "
             "mask=key_ok[:, None] & (offs_v[None, :] < EV), other=0.0)",
             "        acc = acc * alpha[:, None]",
             *product_lines("        ", "acc", "p", "v", "acc", dot),
             "        m_i = m_new",
             "    tl.store(out_ptr + head * Lq * EV + offs_m[:, None] * EV + offs_v[None, :], "
             "acc / l_i[:, None], mask=row_ok[:, None] & (offs_v[None, :] < EV))"]
    return lines


def gpu_configs(ev: int) -> list[tuple]:
    """The autotune list at the captured Ev: (BLOCK_M, BLOCK_N, BLOCK_EV, warps, stages)."""
    full = 1 << max(4, (ev - 1).bit_length())
    return list(dict.fromkeys((m, n, min(full, cap), w, s) for m, n, cap, w, s in GPU_CONFIGS))


def triton(node, name: str, function: str, options) -> Written:
    w = settings(node)
    dot = "ieee" if options.dot == "fma" else options.dot
    listed = ",\n        ".join(
        f"triton.Config({{'BLOCK_M': {m}, 'BLOCK_N': {n}, 'BLOCK_EV': {ev}}}, num_warps={wp}, "
        f"num_stages={st})" for m, n, ev, wp, st in gpu_configs(w["EV"]))
    lines = triton_kernel(name, w["causal"], dot) + [
        "", "", "# On a GPU the autotuner times these blocks the first time a shape is seen; "
        "under the", "# CPU interpreter the launcher passes small fixed blocks instead.",
        "if torch.cuda.is_available():",
        f"    {name} = triton.autotune(configs=[\n        {listed},\n    ], "
        "key=['Lq', 'Lk', 'E', 'EV'])(" + name + ")"]
    small = INTERPRETER_BLOCKS
    launcher = [f"def {function}(q, k, v):",
                f'    """Runs {name}: {what(w)}."""'] + shape_lines() + [
                scale_line(w),
                "    if out.numel() == 0 or Lk == 0:",
                "        return out",
                "    gpu = torch.cuda.is_available()",
                f"    BLOCK_E = min(triton.next_power_of_2(E), "
                f"{GPU_E_CHUNK} if gpu else {small['E_CHUNK']})",
                "    BLOCK_E = max(BLOCK_E, 16)   # tl.dot takes no side under 16",
                "    blocks = {} if gpu else dict(BLOCK_M=%d, BLOCK_N=%d, BLOCK_EV=max(16, min("
                "triton.next_power_of_2(EV), %d)))" % (small["BLOCK_M"], small["BLOCK_N"],
                                                       small["EV_CHUNK"]),
                "    grid = lambda meta: (triton.cdiv(Lq, meta['BLOCK_M']), heads, "
                "triton.cdiv(EV, meta['BLOCK_EV']))",
                f"    {name}[grid](q3, k3, v3, out, Lq, Lk, E, EV, scale * {LOG2E!r}, "
                "BLOCK_E=BLOCK_E, ONE_CHUNK=BLOCK_E >= E" +
                (', INTERPRETER=os.environ.get("TRITON_INTERPRET") == "1"'
                 if dot == "bf16" else "") + ", **blocks)",
                "    return out"]
    return Written("\n".join(lines), launcher, list(node.args), [node], what(w))


# -- C++ -----------------------------------------------------------------------------------------
def cpp(node, name: str, function: str, options) -> Written:
    w = settings(node)
    f = CppFormulas(FUNCTIONS) if options.vector_math else StdFormulas()   # vexp or std::exp
    rescale, weight = f.call("exp", "m - m_new"), f.call("exp", "s[j] - m_new")
    body = [f'extern "C" void {name}(const float* q, const float* k, const float* v, '
            "float* out, int64_t heads, int64_t Lq, int64_t Lk, int64_t E, int64_t EV, "
            "float scale) {",
            "    // one query row per iteration: its scores against a block of keys, then the",
            "    // running max, sum and accumulator rescaled once per block (online softmax)",
            "    #pragma omp parallel",
            "    {",
            "        float* acc = new float[EV > 0 ? EV : 1];",
            f"        float s[{KEY_BLOCK}];",
            "        #pragma omp for collapse(2) schedule(static)",
            "        for (int64_t h = 0; h < heads; ++h) {",
            "            for (int64_t i = 0; i < Lq; ++i) {",
            "                const float* qi = q + (h * Lq + i) * E;",
            "                const float* kh = k + h * Lk * E;",
            "                const float* vh = v + h * Lk * EV;",
            "                float m = -INFINITY, l = 0.0f;",
            "                for (int64_t e = 0; e < EV; ++e) acc[e] = 0.0f;",
            "                const int64_t hi = std::min(Lk, i + 1);   // causal: keys j <= i"
            if w["causal"] else "                const int64_t hi = Lk;",
            f"                for (int64_t j0 = 0; j0 < hi; j0 += {KEY_BLOCK}) {{",
            f"                    const int64_t n = std::min<int64_t>({KEY_BLOCK}, hi - j0);",
            "                    float block_max = -INFINITY;",
            "                    for (int64_t j = 0; j < n; ++j) {",
            "                        const float* kj = kh + (j0 + j) * E;",
            "                        float dot = 0.0f;",
            "                        #pragma omp simd reduction(+:dot)",
            "                        for (int64_t e = 0; e < E; ++e) dot += qi[e] * kj[e];",
            "                        s[j] = dot * scale;",
            "                        block_max = std::max(block_max, s[j]);",
            "                    }",
            "                    const float m_new = std::max(m, block_max);",
            f"                    const float alpha = {rescale};   // 0 on the first block",
            "                    float block_sum = 0.0f;",
            "                    #pragma omp simd reduction(+:block_sum)",
            "                    for (int64_t j = 0; j < n; ++j) {",
            f"                        s[j] = {weight};",
            "                        block_sum += s[j];",
            "                    }",
            "                    l = l * alpha + block_sum;",
            "                    #pragma omp simd",
            "                    for (int64_t e = 0; e < EV; ++e) acc[e] *= alpha;",
            "                    for (int64_t j = 0; j < n; ++j) {",
            "                        const float* vj = vh + (j0 + j) * EV;",
            "                        const float p = s[j];",
            "                        #pragma omp simd",
            "                        for (int64_t e = 0; e < EV; ++e) acc[e] += p * vj[e];",
            "                    }",
            "                    m = m_new;",
            "                }",
            "                float* oi = out + (h * Lq + i) * EV;",
            "                #pragma omp simd",
            "                for (int64_t e = 0; e < EV; ++e) oi[e] = acc[e] / l;",
            "            }",
            "        }",
            "        delete[] acc;",
            "    }",
            "}"]
    launcher = [f"def {function}(q, k, v):",
                f'    """Runs {name}: {what(w)}."""'] + shape_lines() + [
                scale_line(w),
                "    if out.numel() and Lk:",
                f"        kernels.{name}(q3, k3, v3, out, heads, Lq, Lk, E, EV, float(scale))",
                "    return out"]
    return Written("\n".join(body), launcher, list(node.args), [node], what(w),
                   helpers=f.used, libm=f.libm, openmp=True)
