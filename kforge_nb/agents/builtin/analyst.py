"""BuiltinAnalyst: the performance-analysis role as a short list of rules.

It reads the verdict (timing, roofline), the compact profile summary (any key may be missing)
and the candidate's own `# kforge-builtin:` header, walks its rules in order and returns the
first recommendation whose title is not in `request.history`. Each recommendation says what to
change, why, and what to expect, and carries an `action` the BuiltinGenerator applies (as data
where the request carries it: `GenerationRequest.action`). The action is also written at the
end of the text (`action: {...}`): a session that hands the generator only the accepted
recommendation's text, and a recommendation recorded as text, still say what to apply.

It never reads the code itself. What it trusts the header for:
- `target` (else the request's) and `options`: the knobs the candidate was written with, which
  the generator starts from again; a knob already where a rule would set it silences the rule.
  Code without a header has none: every knob counts as not set.
- `facts` (candidate.CodeFacts: the short reductions, the vendor GEMM, the libm and vector
  maths calls, the lane blocks, the task loop, the double accumulators, the OpenMP team, the
  parked output, the Triton product by tl.sum), only while `code_sha256` is the digest of the
  code it sits in. Code without a header (an LLM's) or changed since it was written (a
  person's edit, an LLM's rewrite that kept the line) has no facts, and the rules that need
  one do not fire; the rules on the verdict and the knobs still do.
"""
from __future__ import annotations

import json

from ..base import AnalysisRequest, Recommendation
from ...intervals import speedup_text
from ..feedback import profile_summary, vendor_time_share, why_slower_than_eager
from .candidate import CodeFacts, facts_of, read_header
from .cpp.knobs import host_has_avx512

# the vectorised maths helpers the 512-bit rule counts as long chains of arithmetic
LONG_MATHS = frozenset({"exp", "log", "tanh", "sigmoid", "erf", "log1p", "sin", "cos"})


def facts(request: AnalysisRequest) -> dict:
    """Everything the rules look at, with the summary preferred over the Result."""
    s, r = request.summary or {}, request.result
    t, roof = r.timing, r.roofline
    header = read_header(request.code)
    top = s.get("top_kernels") or []
    vendor_share = vendor_time_share(s)
    return {
        "state": r.state,
        "speedup": s.get("speedup_vs_eager", t.speedup_vs_eager),
        "speedup_ci": s.get("speedup_vs_eager_ci", t.speedup_vs_eager_ci),
        "ms": s.get("candidate_ms", t.candidate_ms),
        "eager_ms": s.get("eager_ms", t.eager_ms),
        "min_bytes": s.get("min_bytes", roof.min_bytes),
        "sol_ms": roof.speed_of_light_ms,
        "fraction": s.get("fraction_of_sol", roof.fraction_of_sol),
        "bound": s.get("bound", roof.bound),
        "launches": s.get("launches"),
        "real": s.get("timing_real", t.real),
        "top": top,
        "vendor_share": vendor_share,
        "summary": s or profile_summary(r),     # the session hands profile_summary(r)
        "options": header.get("options", {}),
        "target": header.get("target", request.target),
        "code": facts_of(request.code),         # what the header says of it (CodeFacts)
    }


def rec(title: str, what: str, why: str, gain: str, action: dict) -> Recommendation:
    text = f"{what} Why: {why} Expected gain: {gain}\naction: {json.dumps(action)}"
    return Recommendation(title=title, text=text, expected_gain=gain, action=action,
                          response=text)


def percent(value) -> str:
    return "unknown" if value is None else f"{value * 100:.0f}%"


def short_reductions(code: CodeFacts, most: int = 7) -> list[int]:
    """Extents of the reductions in the candidate's kernels shorter than one 8-float vector.
    Measured on this CPU (1M elements, rows of 4 to 128): across rows wins for every op at 4
    (1.7-6x), is op-dependent from 8 to 32 (a logsumexp still gains 2-4x, a softmax or a sum
    loses), and loses past 32; the middle is left to the knob sweep."""
    return [n for n in code.reductions if n <= most]


def across_rows(f: dict) -> list[Recommendation]:
    short = short_reductions(f["code"])
    if not short or f["options"].get("rows_as_lanes"):
        return []
    return [rec(
        "vectorise across rows",
        "Give each task a block of rows and run the simd loop across them, one accumulator "
        "per row, instead of along each row.", f"a reduction here covers only "
        f"{min(short)} element(s), fewer than one vector's lanes, so the loop along a row "
        "barely vectorises and pays its setup for every row; across rows every lane is busy "
        "(the loads are strided, the row block stays in L1).",
        "2-5x on those kernels.", {"kind": "rows_as_lanes", "value": True})]


def cpp_rules(f: dict) -> list[Recommendation]:
    o, code, out = f["options"], f["code"], []
    vendor_gemm = bool(code.vendor_gemm)
    if vendor_gemm and o.get("matmul", "vendor") == "vendor":
        out.append(rec(
            "compute the matrix product in the C++ kernel",
            "Replace the kept vendor GEMM with the generated register-tiled C++ GEMM and apply "
            "the ops that follow it inside its store loop.",
            (f"the vendor op takes {percent(f['vendor_share'])} of the time; " if
             f["vendor_share"] else "") + "on this CPU the 4 x 64 register tile sustains more "
            "GFLOP/s than the library's generic path, and fusing the epilogue saves writing and "
            "re-reading the product.", "1.2-1.8x on the product, plus the epilogue's traffic.",
            {"kind": "matmul", "value": "kernel"}))
    if f["vendor_share"] > 0.6 and not vendor_gemm:
        out.append(rec(
            "leave the vendor op as it is",
            f"Most of the time ({percent(f['vendor_share'])}) is spent in torch's own op "
            "(GEMM or convolution from oneDNN/MKL), not in the generated kernels.",
            "the fused kernels are already a small part of the total; a hand-written C++ "
            "product would not beat the vendor library on this CPU.",
            "none from the kernels; at most a few percent.", {"kind": "done"}))
    out += across_rows(f)
    if o.get("vector_math") is False or code.scalar_math:
        out.append(rec(
            "vectorise the transcendental functions",
            "Replace the std:: maths calls in the loops with the branch-free vexp/vlog/vtanh "
            "helpers (branch-free, inlined into the loop).",
            "without fast-math flags GCC calls libm one element at a time, so loops around "
            "std::exp are not vectorised.", "2-8x on the kernels with exp/tanh/erf.",
            {"kind": "vector_math", "enable": True}))
    if host_has_avx512() and o.get("vector_width", 0) != 512 and code.vector_math & LONG_MATHS:
        out.append(rec(
            "use 512-bit vectors",
            "Ask g++ for AVX-512 registers in the kernels (prefer-vector-width=512).",
            "this CPU has AVX-512, but g++ tunes it for 256-bit vectors; the vectorised maths "
            "helpers are long chains of arithmetic, so twice the lanes per instruction is up "
            "to twice the throughput where the kernel is not waiting on memory.",
            "1.1-2x on maths-heavy kernels (measured 0.6x-2x across kernels on this CPU; the "
            "evaluator decides).", {"kind": "vector_width", "value": 512}))
    small = f["ms"] is not None and f["ms"] < 0.05
    if small and (o.get("min_parallel_work") or 0) < 131072:
        out.append(rec(
            "run small inputs on one thread",
            "Raise the OpenMP threshold so kernels with fewer than 131072 elements run on the "
            "calling thread.", f"the whole call takes {f['ms']:.3g} ms; waking the OpenMP "
            "team and joining it costs several microseconds, a large share at this size.",
            "10-30% on small inputs.", {"kind": "min_parallel_work", "value": 131072}))
    if code.lane_block and o.get("lane_block", 256) < 1024:
        out.append(rec(
            "give each task more lanes",
            "Raise LANE_BLOCK from 256 to 1024 lanes per task in the kernels that reduce over "
            "a middle dimension.", "longer contiguous simd runs and fewer tasks; the "
            "per-lane accumulators still fit in L1.", "5-20% on those kernels.",
            {"kind": "lane_block", "value": 1024}))
    if f["bound"] == "memory" and (f["fraction"] or 0) < 0.5 and o.get("schedule") != "dynamic" \
            and code.task_loop:
        out.append(rec(
            "balance the row loop dynamically",
            "Use schedule(dynamic) for the row loop.", f"the kernel reaches "
            f"{percent(f['fraction'])} of the memory roofline; on a shared machine a "
            "statically split loop waits for its slowest thread.", "0-15%, noisy hosts most.",
            {"kind": "schedule", "value": "dynamic"}))
    if o.get("accumulate", "auto") == "auto" and code.double_accumulator:
        out.append(rec(
            "accumulate in float",
            "Accumulate the long reductions in float instead of double.", "float "
            "accumulators halve the reduction's register width, so twice as many lanes per "
            "instruction; the error stays near 1e-6 relative at these lengths.",
            "10-30% on the reduction passes, at a small precision cost.",
            {"kind": "accumulate", "value": "float"}))
    return out


def triton_rules(f: dict) -> list[Recommendation]:
    o, code, out = f["options"], f["code"], []
    interpreted = f["real"] is False
    caveat = " (timings here come from Triton's CPU interpreter and say nothing about a GPU)" \
        if interpreted else ""
    vendor_gemm = bool(code.vendor_gemm)
    if code.triton_dot_by_sum:
        out.append(rec(
            "multiply the tiles with tl.dot in ieee precision",
            "Replace the tl.sum of broadcast products with tl.dot(a, b, acc, "
            'input_precision="ieee") and let the autotuner pick the tiles.',
            "the same exact fp32 products, but Triton schedules them as an FMA matrix product "
            "instead of materialising a BLOCK_M x BLOCK_K x BLOCK_N tensor" + caveat + ".",
            "several times on the product on a GPU.",
            {"kind": "matmul", "value": "kernel", "dot": "ieee"}))
    tiny = f["real"] and f["ms"] is not None and f["ms"] < 0.02
    if vendor_gemm and tiny and o.get("matmul", "vendor") == "vendor":
        out.append(rec(
            "fuse the small product into the kernel",
            "Compute the matrix product in a Triton kernel (exact fp32, tl.dot in ieee "
            "precision) with the ops after it applied to the tile, instead of the vendor GEMM "
            "and a separate epilogue kernel.",
            f"the whole call takes {f['ms']:.3g} ms, so the second launch and the round trip "
            "of the product through memory are a large share of it.",
            "10-40% at this size; none on large shapes, where the vendor GEMM wins.",
            {"kind": "matmul", "value": "kernel", "dot": "ieee"}))
    if vendor_gemm and f["vendor_share"] > 0.6:
        out.append(rec(
            "leave the vendor GEMM as it is",
            f"Most of the time ({percent(f['vendor_share'])}) is in the vendor matrix product; "
            "the fused Triton epilogue is the rest.",
            "under strict fp32 the vendor GEMM already runs near the speed of light; only a "
            "lower-precision policy (tf32, bf16) would make the product faster.",
            "none from the kernels.", {"kind": "done"}))
    if not o.get("autotune"):
        out.append(rec(
            "autotune the block size",
            "Let @triton.autotune pick BLOCK_SIZE and num_warps from three configurations.",
            "the best block size depends on the GPU and the row length" + caveat + ".",
            "0-30% depending on shapes.", {"kind": "autotune", "enable": True}))
    if o.get("num_warps", 4) < 8 or o.get("row_warps", 8) != 8:
        out.append(rec(
            "use 8 warps per program",
            "Launch every kernel, row kernels too, with num_warps=8.",
            "long rows keep more warps busy per program" + caveat + ".", "0-20%.",
            {"kind": "warps", "value": 8}))
    if o.get("block_size", 1024) < 4096:
        out.append(rec(
            "process 4096 elements per step",
            "Set BLOCK_SIZE to 4096.", "fewer loop iterations and programs" + caveat + ".",
            "0-15%.", {"kind": "block_size", "value": 4096}))
    return out


RULES = {"cpp": cpp_rules, "triton": triton_rules}     # a target's own rules, by its name


def slower_than_eager(f: dict) -> bool:
    return f["real"] is not False and f["speedup"] is not None and f["speedup"] < 1.0


def recovery_rules(f: dict) -> list[Recommendation]:
    """What to try, before anything else, while the best candidate is slower than eager."""
    o, code, out = f["options"], f["code"], []
    speed = f"the best candidate runs at {speedup_text(f['speedup'], f.get('speedup_ci'))} eager"
    if o.get("matmul") == "kernel":
        out.append(rec(
            "go back to the vendor GEMM",
            "Compute the matrix product with torch's GEMM again and keep only the epilogue in "
            "the generated kernel.", f"{speed}; the generated product is the likeliest cause.",
            "back to at least the vendor's speed on the product.",
            {"kind": "matmul", "value": "vendor"}))
    if f["target"] == "cpp":
        out += across_rows(f)        # a diagnosed cause goes before the generic recoveries
        if (o.get("min_parallel_work") or 0) < 1 << 30 and code.openmp:
            out.append(rec(
                "run the whole call on one thread",
                "Raise the OpenMP threshold so every kernel runs on the calling thread.",
                f"{speed}; waking and joining the thread team costs microseconds per kernel, "
                "and on a shared or small machine a thread may wait for a busy core.",
                "large on small inputs; a loss on large ones (the evaluator measures it).",
                {"kind": "min_parallel_work", "value": 1 << 30}))
        if o.get("reuse_output", True) and code.parked_output:
            out.append(rec(
                "recompute instead of re-reading the output",
                "Compute the parked value again in the final pass instead of storing it in the "
                "output and reading it back.", f"{speed}; the store and the re-read are a full "
                "extra trip through memory when the row does not stay in cache.",
                "0-30% on long rows.", {"kind": "reuse_output", "value": False}))
    return out


def keep_pytorch(f: dict) -> Recommendation:
    reason = why_slower_than_eager(f["summary"])
    action = {"kind": "done", "verdict": "keep_pytorch", "why": reason}
    best = speedup_text(f["speedup"], f.get("speedup_ci"))
    return rec("best left in PyTorch",
               f"No candidate beats eager ({best} at best); the module is best left "
               "in PyTorch.", reason + ".", "none.", action)


def with_objective(recommendation: Recommendation, objective: str) -> Recommendation:
    """The user's goal (--objective) said in the text, before the action line the generator
    reads. The rules themselves know only speed."""
    if objective:
        what, sep, action = recommendation.text.rpartition("\naction: ")
        text = f"{what} Your objective: {objective}.{sep}{action}" if sep else \
            f"{recommendation.text} Your objective: {objective}."
        recommendation.text = recommendation.response = text
    return recommendation


class BuiltinAnalyst:
    """Rule-based analysis agent: one recommendation, never one already given."""

    reads_counters = False       # its rules read the verdict and the plan, not ncu's counters

    def analyse(self, request: AnalysisRequest) -> Recommendation:
        return with_objective(self.choose(request), request.objective)

    def choose(self, request: AnalysisRequest) -> Recommendation:
        f = facts(request)
        if f["state"] != "correct":
            return rec("make it correct first",
                       "Regenerate the most conservative version (library maths, double "
                       "accumulators).", f"the last candidate was {f['state']}; optimising "
                       "it is pointless.", "correctness.", {"kind": "fix"})
        rules = RULES.get(f["target"], triton_rules)(f)
        if slower_than_eager(f):
            # "leave the vendor op as it is" says done: not while a recovery is left to try
            recovery = recovery_rules(f)
            first = {r.title for r in recovery}
            rules = recovery + [r for r in rules if r.action.get("kind") != "done"
                                and r.title not in first]
        fresh = [r for r in rules if r.title not in request.history]
        if fresh and fresh[0].title in request.elsewhere:
            # another branch of the search tries this one this round: the next change that
            # applies, so the round covers more ideas (never "done" in its place)
            fresh = [r for r in fresh if r.title not in request.elsewhere
                     and r.action.get("kind") != "done"] or fresh
        if fresh:
            return fresh[0]
        if slower_than_eager(f):
            return keep_pytorch(f)
        speed = f"{speedup_text(f['speedup'], f.get('speedup_ci'))} eager" if f["speedup"] \
            else "unknown speed"
        title = "no further change expected"
        if title in request.history:
            title += f" (round {len(request.history) + 1})"
        return rec(title,
                   f"The builtin agent has no rule left for this candidate ({speed}, "
                   f"{percent(f['fraction'])} of speed of light).",
                   "every change it knows has been tried or does not apply.", "none.",
                   {"kind": "done"})
