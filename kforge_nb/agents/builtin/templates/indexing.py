"""Gathers and scatters by index tensors (capture/ops_index.py) as one kernel that moves rows.

Every case is written over the same view of the indexed tensor x: [outer, n0, ..., n(k-1),
row], where the k indexed dims start at `dim` and the row is everything after them. Index
position j (one per element of the index tensors, all of one shape) names one row per outer
index: its place in each indexed dim is the node's formula over the index tensors, with
torch's floor semantics for `//` and `%` and negative positions counting from the end.

* gather: out[o, j, :] = x[o, p(j), :];
* scatter: out = x, then out[o, p(j), :] = values[o, j, :] (values broadcast to that shape).

A row is copied as bits whatever the dtype (bf16 moves as 16-bit words, never through
float32). Where indices repeat in a scatter the last row in index order is the one that stays,
on both targets and however many threads or programs write: torch documents the result as
undefined, and its CPU kernel keeps the last write only at small sizes. No kernel reads or
writes outside a tensor: an out-of-range position is skipped; the C++ kernel counts them and
its launcher raises IndexError as torch does, the Triton one leaves such rows unwritten (a
gathered row reads 0): a check on the host would wait for the kernel on every call.
"""
from __future__ import annotations

from . import Written

WORDS = "{1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}"


def settings(node) -> dict:
    p = node.attrs["params"]
    scatter = node.fn == "scatter"
    tensors = 2 if scatter else 1
    return {"scatter": scatter, "dim": p["dim"], "positions": p["positions"],
            "k": len(p["positions"]), "leaves": [f"i{k}" for k in range(p["leaves"])],
            "leaf_types": [node.args[tensors + k].dtype for k in range(p["leaves"])],
            "source": node.attrs["call"]}


def position(formula, leaves: list[str], divide: str) -> str:
    """One indexed dim's place as an expression over the loaded indices. Floor division and
    remainder are written so that C's truncating and Python's flooring operators agree: the
    remainder is brought into the divisor's sign, and the division that follows is exact."""
    op = formula[0]
    if op == "leaf":
        return leaves[formula[1]]
    inner, by = position(formula[1], leaves, divide), formula[2]
    remainder = f"((({inner}) % {by} + {by}) % {by})"
    return remainder if op == "mod" else f"((({inner}) - {remainder}) {divide} {by})"


def what(w: dict) -> str:
    computed = ("; each position's floor division and remainder computed as its index is read"
                if any(f[0] != "leaf" for f in w["positions"]) else "")
    if w["scatter"]:
        return (f"{w['source']}: writes whole rows by index into a copy of the destination, each "
                f"moved as bits in its own dtype; where indices repeat, the last one's row "
                f"stays{computed}")
    return f"{w['source']}: gathers whole rows by index, each moved as bits in its own dtype{computed}"


def launcher_head(w: dict, function: str, name: str) -> list[str]:
    """The wrapper's first lines: contiguous operands, the sizes of the [outer, n.., row] view,
    the output (a fresh tensor for a gather, a copy of x for a scatter)."""
    d, k, first = w["dim"], w["k"], w["leaves"][0]
    names = ["x"] + (["values"] if w["scatter"] else []) + w["leaves"]
    lines = [f"def {function}({', '.join(names)}):",
             f'    """Runs {name}: {what(w)}."""']
    lines += [f"    {i} = {i}.contiguous()" for i in w["leaves"]]
    lines += [f"    shape = x.shape[:{d}] + {first}.shape + x.shape[{d + k}:]",
              f"    sizes = tuple(x.shape[{d}:{d + k}])",
              f"    outer, rows, row = x.shape[:{d}].numel(), {first}.numel(), "
              f"x.shape[{d + k}:].numel()"]
    if w["scatter"]:
        lines += ["    out = x.clone(memory_format=torch.contiguous_format)",
                  "    values = values.expand(shape).contiguous()"]
    else:
        lines += ["    x = x.contiguous()",
                  "    out = torch.empty(shape, dtype=x.dtype, device=x.device)"]
    return lines


# -- C++ -----------------------------------------------------------------------------------------
CPP_INDEX = {"torch.int64": "int64_t", "torch.int32": "int32_t"}
# Below this many bytes moved one thread copies them all: starting and joining a team costs more
# than the copy (a decode step's few rows), and far more on a busy machine.
CPP_TEAM_BYTES = 1 << 18
TEAM = f"if(outer * rows * row_bytes >= {CPP_TEAM_BYTES})"


def cpp_positions(w: dict, indent: str) -> list[str]:
    """C++ lines computing p0.. and `ok` for index position r."""
    loads = [f"(int64_t){leaf}[r]" for leaf in w["leaves"]]
    lines = []
    for m, formula in enumerate(w["positions"]):
        lines += [f"{indent}int64_t p{m} = {position(formula, loads, '/')};",
                  f"{indent}p{m} += p{m} < 0 ? n{m} : 0;   // negative: from the end, as torch"]
    inside = " && ".join(f"p{m} >= 0 && p{m} < n{m}" for m in range(w["k"]))
    return lines + [f"{indent}const bool ok = {inside};"]


def cpp_flat(w: dict) -> str:
    """The row's index in x's [outer, n.., row] view."""
    flat = "o"
    for m in range(w["k"]):
        flat = f"({flat} * n{m} + p{m})"
    return flat


def cpp(node, name: str, function: str, options) -> Written:
    w = settings(node)
    sizes = ", ".join(f"int64_t n{m}" for m in range(w["k"]))
    leaves = ", ".join(f"const {CPP_INDEX[str(t)]}* {leaf}"
                       for leaf, t in zip(w["leaves"], w["leaf_types"]))
    if w["scatter"]:
        body = [f'extern "C" int64_t {name}(void* out, const void* values, {leaves}, '
                f"int64_t outer, int64_t rows, {sizes}, int64_t row_bytes) {{",
                "    // out[o, p(r), :] = values[o, r, :], whole rows of bits. Each thread owns",
                "    // the destination rows whose number modulo the threads is its own and walks",
                "    // the indices in order: where they repeat, the last one's row stays.",
                "    char* dst = static_cast<char*>(out);",
                "    const char* src = static_cast<const char*>(values);",
                "    int64_t bad = 0;",
                f"    #pragma omp parallel reduction(+:bad) {TEAM}",
                "    {",
                "        const int64_t me = omp_get_thread_num(), threads = omp_get_num_threads();",
                "        for (int64_t o = 0; o < outer; ++o) {",
                "            for (int64_t r = 0; r < rows; ++r) {"]
        body += cpp_positions(w, " " * 16)
        body += ["                if (!ok) { bad += me == 0; continue; }   // never written",
                 f"                const int64_t at = {cpp_flat(w)};",
                 "                if (at % threads != me) continue;",
                 "                __builtin_memcpy(dst + at * row_bytes, src + (o * rows + r) * "
                 "row_bytes, row_bytes);",
                 "            }", "        }", "    }", "    return bad;", "}"]
        call_args = ["out", "values"]
    else:
        body = [f'extern "C" int64_t {name}(const void* x, {leaves}, void* out, int64_t outer, '
                f"int64_t rows, {sizes}, int64_t row_bytes) {{",
                "    // out[o, r, :] = x[o, p(r), :], whole rows of bits (bf16 stays bf16)",
                "    const char* src = static_cast<const char*>(x);",
                "    char* dst = static_cast<char*>(out);",
                "    int64_t bad = 0;",
                f"    #pragma omp parallel for collapse(2) reduction(+:bad) schedule(static) {TEAM}",
                "    for (int64_t o = 0; o < outer; ++o) {",
                "        for (int64_t r = 0; r < rows; ++r) {"]
        body += cpp_positions(w, " " * 12)
        body += ["            char* to = dst + (o * rows + r) * row_bytes;",
                 "            if (!ok) { __builtin_memset(to, 0, row_bytes); ++bad; continue; }",
                 f"            __builtin_memcpy(to, src + {cpp_flat(w)} * row_bytes, row_bytes);",
                 "        }", "    }", "    return bad;", "}"]
        call_args = ["x"]
    call_args += w["leaves"] + (["out"] if not w["scatter"] else []) + \
        ["outer", "rows", "*sizes", "row * x.element_size()"]
    launcher = launcher_head(w, function, name) + [
        "    if out.numel() and rows:",
        f"        if kernels.{name}({', '.join(call_args)}):",
        f"            raise IndexError(f\"{w['source']}: an index is out of range for the "
        f"indexed dims of sizes {{sizes}}\")",
        "    return out"]
    return Written("\n".join(body), launcher, list(node.args), [node], what(w), openmp=True)


# -- Triton --------------------------------------------------------------------------------------
def triton_positions(w: dict) -> list[str]:
    """Triton lines computing p0.. and `ok` for the program's index position r."""
    lines = [f"    {leaf} = tl.load({leaf}_ptr + r).to(tl.int64)" for leaf in w["leaves"]]
    for m, formula in enumerate(w["positions"]):
        lines += [f"    p{m} = {position(formula, w['leaves'], '//')}",
                  f"    p{m} = tl.where(p{m} < 0, p{m} + n{m}, p{m})   # from the end, as torch"]
    inside = " & ".join(f"(p{m} >= 0) & (p{m} < n{m})" for m in range(w["k"]))
    return lines + [f"    ok = {inside}", f"    at = {cpp_flat(w)}"]


def triton(node, name: str, function: str, options) -> Written:
    w = settings(node)
    sizes = ", ".join(f"n{m}" for m in range(w["k"]))
    leaves = ", ".join(f"{leaf}_ptr" for leaf in w["leaves"])
    start = ["    pid = tl.program_id(0).to(tl.int64)     # one (outer, index) pair",
             "    o = pid // rows",
             "    r = pid % rows"]
    cols = ["    cols = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)"]
    if w["scatter"]:
        kernel = ["@triton.jit",
                  f"def {name}_claim(owner_ptr, {leaves}, rows, {sizes}):",
                  "    # each destination row remembers the last index that writes it",
                  *start, *triton_positions(w),
                  "    tl.atomic_max(owner_ptr + at, r, mask=ok)",
                  "", "",
                  "@triton.jit",
                  f"def {name}(out_ptr, values_ptr, owner_ptr, {leaves}, rows, {sizes}, row_len, "
                  "BLOCK: tl.constexpr):",
                  "    # out[o, p(r), :] = values[o, r, :] where r is the row's last writer",
                  *start, *triton_positions(w), *cols,
                  "    mine = ok & (tl.load(owner_ptr + at, mask=ok, other=-1) == r)",
                  "    inside = cols < tl.where(mine, row_len, 0)   # no column where not mine",
                  "    v = tl.load(values_ptr + pid * row_len + cols, mask=inside)",
                  "    tl.store(out_ptr + at * row_len + cols, v, mask=inside)"]
        launch = [f"        owner = torch.full((outer, *sizes), -1, dtype=torch.int64, "
                  "device=x.device)",
                  f"        {name}_claim[(outer * rows,)](owner, {', '.join(w['leaves'])}, rows, "
                  "*sizes)",
                  f"        {name}[grid](out.view(word), values.view(word), owner, "
                  f"{', '.join(w['leaves'])}, rows, *sizes, row, BLOCK=BLOCK)"]
    else:
        kernel = ["@triton.jit",
                  f"def {name}(x_ptr, {leaves}, out_ptr, rows, {sizes}, row_len, "
                  "BLOCK: tl.constexpr):",
                  "    # out[o, r, :] = x[o, p(r), :]: one block of one row, moved as bits",
                  *start, *triton_positions(w), *cols,
                  "    inside = cols < row_len",
                  "    found = cols < tl.where(ok, row_len, 0)     # an index out of range reads 0",
                  "    v = tl.load(x_ptr + at * row_len + cols, mask=found, other=0)",
                  "    tl.store(out_ptr + pid * row_len + cols, v, mask=inside)"]
        launch = [f"        {name}[grid](x.view(word), {', '.join(w['leaves'])}, out.view(word), "
                  "rows, *sizes, row, BLOCK=BLOCK)"]
    launcher = launcher_head(w, function, name) + [
        "    if out.numel() and rows:",
        f"        word = {WORDS}[x.element_size()]   # rows move as bits",
        "        BLOCK = min(1024, triton.next_power_of_2(row))",
        "        grid = (outer * rows, triton.cdiv(row, BLOCK))",
        *launch,
        "    return out"]
    return Written("\n".join(kernel), launcher, list(node.args), [node], what(w))
