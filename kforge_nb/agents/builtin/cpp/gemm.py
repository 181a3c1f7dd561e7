"""Matrix products in C++ for the CPU, with the pointwise ops that follow fused into the store.

The structure is the classic one (Goto/BLIS), written plainly. A task owns a block of C of
64 rows x 64 columns. For each slice of 192 values of k it copies the matching 192 x 64 panel
of B into a contiguous buffer (transposing it when B is stored (N, K), as a Linear weight is),
then walks the block 4 rows at a time: 4 values of A are broadcast against each 64-wide row
of the panel, so the 4 x 64 partial sums (16 AVX-512 registers) stay in the core for the
whole slice. Each slice's partial sums are added to C (which starts at the bias). That is
also the order oneDNN/MKL sum in on this machine, so the results agree with torch's bit for
bit rather than to a rounding error. The pointwise group after the product, if it only reads
the product and operands indexed by (row, col), is applied before the store, so C never makes
a round trip through memory.

A bf16 / fp16 product (all operands of that dtype) reads their 16 bits: B's panel and a copy
of A's rows for the slice are converted to float32 (exactly) as they are packed, so the
micro-kernel is the float32 one; the sums start at the bias in float32 and each element is
rounded once to the 16-bit dtype at the store, as torch's bf16 addmm (fp32 accumulation).
"""
from __future__ import annotations

from ..candidate import CodeFacts, dtype_expr, output_shape
from ..capture.ir import HALF, Node, transposed_source
from ..capture.partition import Group, Schedule
from ..elementwise import StdFormulas
from ..kernel import KernelPlan
from .kernels import CppKernel
from .knobs import CppOptions
from .passes import ctype, pointer

def layout(node: Node) -> tuple[str, Node, Node, bool]:
    """("nn" | "nt", a, b as the kernel reads it, batched) for a product node."""
    a, b = node.args[0], node.args[1]
    batched = node.fn == "bmm" or (len(a.shape) == 3 and len(b.shape) == 3)
    if node.fn == "linear":
        return "nt", a, b, False
    source = transposed_source(b)
    if source is not None:
        return "nt", a, source, batched
    if not batched and len(b.shape) == 2 and b.shape[1] == 1:
        return "nt", a, b, False           # a matrix-vector product: x (K, 1) read as (1, K)
    return "nn", a, b, batched


def epilogue_for(plan: Schedule, node: Node) -> Group | None:
    """The pointwise group right after the product that can run in the product's store loop."""
    if len(node.shape) < 2 or (node.fn in ("bmm", "matmul") and len(node.shape) > 2 and
                               layout(node)[3]):
        return None
    for g in plan.groups:
        uses = [p for (user, k), p in g.uses.items() if user.args[k] is node]
        if not uses or any(p != frozenset(g.all_ids()) for p in uses) or g.reductions() or \
                g.scan is not None or tuple(g.base) != tuple(node.shape) or \
                not all(u in g.member_set for u in node.users):
            continue
        regions = g.regions()
        n_ids = g.base_cover()[-1]
        if len(regions) == 1 or (regions[-1].ids == n_ids and
                                 all(not set(r.ids) & set(n_ids) for r in regions[:-1])):
            return g
    return None


# The micro-kernel, shared by every product in the file. It is a function of its own so that
# nothing else in the kernel (an epilogue calling vexp, say) competes for registers with the
# 4 x 64 partial sums.
MICRO_KERNEL = r"""
constexpr int64_t TILE_ROWS = 4, TILE_COLS = 64;

// block_rows[r][j] += sum over kk of a_rows[r * a_stride + kk] * panel[kk][j], for r < rows.
// The sum over this slice of k starts from zero and is added once (see the GEMM kernels).
__attribute__((noinline)) static void tile_product(const float* a_rows, int64_t a_stride,
                                                   const float* panel, int64_t k_here,
                                                   int64_t rows, float* block_rows) {
    float part[TILE_ROWS][TILE_COLS] = {};
    if (rows == TILE_ROWS) {   // fixed trip counts: the 16 vectors of partial sums stay in registers
        for (int64_t kk = 0; kk < k_here; ++kk) {
            for (int64_t r = 0; r < TILE_ROWS; ++r) {
                const float a_value = a_rows[r * a_stride + kk];
                #pragma omp simd
                for (int64_t j = 0; j < TILE_COLS; ++j)
                    part[r][j] = std::fma(a_value, panel[kk * TILE_COLS + j], part[r][j]);
            }
        }
    } else {
        for (int64_t kk = 0; kk < k_here; ++kk) {
            for (int64_t r = 0; r < rows; ++r) {
                const float a_value = a_rows[r * a_stride + kk];
                #pragma omp simd
                for (int64_t j = 0; j < TILE_COLS; ++j)
                    part[r][j] = std::fma(a_value, panel[kk * TILE_COLS + j], part[r][j]);
            }
        }
    }
    for (int64_t r = 0; r < rows; ++r) {
        #pragma omp simd
        for (int64_t j = 0; j < TILE_COLS; ++j) block_rows[r * TILE_COLS + j] += part[r][j];
    }
}
"""


class CppGemm:
    def __init__(self, node: Node, name: str, epilogue: KernelPlan | None, options: CppOptions):
        self.node, self.name, self.ep, self.o = node, name, epilogue, options
        self.kind, self.a, self.b, self.batched = layout(node)
        # one column: x (K, 1) read as (1, K), or a Linear to one output (its weight is (1, K))
        self.matvec = self.kind == "nt" and self.b is node.args[1] and not self.batched and \
            (node.fn != "linear" or node.shape[-1] == 1)
        self.bias = node.args[2] if len(node.args) > 2 else None
        operands = {self.a, self.b, self.bias, node}
        self.ep_inputs = [n for n in (epilogue.inputs if epilogue else []) if n not in operands]
        self.outputs = epilogue.outputs if epilogue else [node]
        self.helpers: set[str] = set()
        self.libm: set[str] = set()       # the epilogue's library maths (the "fix" version)
        self.storage = StdFormulas()      # the bf16 / fp16 loads and stores (their helpers)
        self.facts = CodeFacts(openmp=True)     # both bodies split their rows over the team

    def load(self, operand: Node, element: str) -> str:
        """An element of an operand as float32 (a bf16 / fp16 one converted from its bits)."""
        return self.storage.loaded(operand.dtype, element)

    def out_name(self, o: Node) -> str:
        return "out" if len(self.outputs) == 1 else f"{o.name}_out"

    def kernel(self) -> str:
        ep = self.ep
        params = [f"const {ctype(x)}* {x.name}" for x in (self.a, self.b, self.bias)
                  if x is not None]
        params += [f"const float* {n.name}" for n in self.ep_inputs]
        params += [f"{ctype(o)}* {self.out_name(o)}" for o in self.outputs]
        params += [f"float {s.name}" for s in (ep.scalars if ep else [])]
        params += ["int64_t batches", "int64_t M", "int64_t N", "int64_t K"]
        params += [f"int64_t {r.size_name}" for r in (ep.regions if ep else [])]
        what = f"{self.a.name} @ {self.b.name}{'.T' if self.kind == 'nt' else ''}" + \
            (f" + {self.bias.name}" if self.bias is not None else "")
        if ep:
            what += ", then " + ", ".join(dict.fromkeys(m.origin or m.fn for m in ep.group.members
                                                        if m.op != "host"))
        lines = [f"// {what}.",
                 f'extern "C" void {self.name}({", ".join(params)}) {{']
        lines += self.matvec_body() if self.matvec else self.body()
        lines.append("}")
        self.helpers |= self.storage.used
        return "\n".join(lines)

    def body(self) -> list[str]:
        a, b = self.a.name, self.b.name
        if self.kind == "nn":   # B is (K, N): each row of the panel is a contiguous copy
            pack = [
                "            for (int64_t kk = 0; kk < k_here; ++kk) {",
                f"                const {ctype(self.b)}* b_row = "
                f"{b} + (batch * K + k0 + kk) * N + tile_col;",
                "                for (int64_t j = 0; j < TILE_COLS; ++j)",
                "                    panel[kk * TILE_COLS + j] = j < cols_here ? "
                f"{self.load(self.b, 'b_row[j]')} : 0.0f;",
                "            }"]
        else:                   # B is stored (N, K): the panel is that block transposed
            pack = [
                "            for (int64_t j = 0; j < TILE_COLS; ++j) {",
                "                const int64_t col = std::min(tile_col + j, N - 1);",
                f"                const {ctype(self.b)}* b_row = "
                f"{b} + (batch * N + col) * K + k0;",
                "                for (int64_t kk = 0; kk < k_here; ++kk)",
                "                    panel[kk * TILE_COLS + j] = j < cols_here ? "
                f"{self.load(self.b, 'b_row[kk]')} : 0.0f;",
                "            }"]
        start = self.load(self.bias, f"{self.bias.name}[tile_col + j]") \
            if self.bias is not None else "0.0f"
        init = start if self.bias is None else f"j < cols_here ? {start} : 0.0f"
        return [
            "    constexpr int64_t BLOCK_ROWS = 128, K_BLOCK = 192;",
            "    const int64_t row_blocks = (M + BLOCK_ROWS - 1) / BLOCK_ROWS;",
            "    const int64_t col_tiles = (N + TILE_COLS - 1) / TILE_COLS;",
            "    #pragma omp parallel for schedule(static)",
            "    for (int64_t task = 0; task < batches * row_blocks * col_tiles; ++task) {",
            "        const int64_t batch = task / (row_blocks * col_tiles);",
            "        const int64_t block_row = (task / col_tiles) % row_blocks * BLOCK_ROWS;",
            "        const int64_t tile_col = task % col_tiles * TILE_COLS;",
            "        const int64_t rows_here = std::min(BLOCK_ROWS, M - block_row);",
            "        const int64_t cols_here = std::min(TILE_COLS, N - tile_col);",
            f"        const {ctype(self.a)}* a_batch = {a} + batch * M * K;",
            "        float block[BLOCK_ROWS][TILE_COLS];      // this task's block of C",
            "        float panel[K_BLOCK * TILE_COLS];        // a K_BLOCK x TILE_COLS slice of B",
            *(["        float a_rows[BLOCK_ROWS * K_BLOCK];      // A's rows of the slice"]
              if self.a.dtype in HALF else []),
            "        for (int64_t r = 0; r < rows_here; ++r)",
            "            for (int64_t j = 0; j < TILE_COLS; ++j)",
            f"                block[r][j] = {init};",
            "        // K slices: one up to K_BLOCK, two halves up to 2 * K_BLOCK, then K_BLOCK each",
            "        const bool halves = K > K_BLOCK && K <= 2 * K_BLOCK;",
            "        for (int64_t k0 = 0, k_here = 0; k0 < K; k0 += k_here) {",
            "            k_here = halves ? (k0 == 0 ? K / 2 : K - K / 2) : std::min(K_BLOCK, K - k0);",
            *pack,
            *self.a_slice(),
            "            for (int64_t tile_row = 0; tile_row < rows_here; tile_row += TILE_ROWS)",
            "                tile_product(a_rows + tile_row * a_stride, a_stride, panel, k_here,",
            "                             std::min(TILE_ROWS, rows_here - tile_row), block[tile_row]);",
            "        }",
            "        for (int64_t r = 0; r < rows_here; ++r) {",
            "            #pragma omp simd",
            "            for (int64_t j = 0; j < cols_here; ++j) {",
            *self.store("block[r][j]", depth=4),
            "            }",
            "        }",
            "    }"]

    def a_slice(self) -> list[str]:
        """The lines that leave this slice's rows of A in `a_rows` (row stride `a_stride`):
        float32 A in place, a 16-bit A converted into the task's buffer."""
        if self.a.dtype not in HALF:
            return ["            const float* a_rows = a_batch + block_row * K + k0;",
                    "            const int64_t a_stride = K;"]
        return ["            const int64_t a_stride = K_BLOCK;",
                "            for (int64_t r = 0; r < rows_here; ++r) {",
                "                const uint16_t* a_row = a_batch + (block_row + r) * K + k0;",
                "                #pragma omp simd",
                "                for (int64_t kk = 0; kk < k_here; ++kk)",
                "                    a_rows[r * K_BLOCK + kk] = "
                f"{self.load(self.a, 'a_row[kk]')};",
                "            }"]

    def matvec_body(self) -> list[str]:
        a, b = self.a.name, self.b.name
        return [
            "    // y = A x: one dot product per row, 16 lanes at a time, partial sums in double",
            "    // (the vendor's summation order is not known here, so aim for the exact value).",
            "    #pragma omp parallel for schedule(static)",
            "    for (int64_t row = 0; row < batches * M; ++row) {",
            f"        const {ctype(self.a)}* a_row = {a} + row * K;",
            "        double lanes_sum[16] = {};",
            "        int64_t kk = 0;",
            "        for (; kk + 16 <= K; kk += 16) {",
            "            #pragma omp simd",
            "            for (int64_t l = 0; l < 16; ++l)",
            f"                lanes_sum[l] += (double){self.load(self.a, 'a_row[kk + l]')} * "
            f"(double){self.load(self.b, f'{b}[kk + l]')};",
            "        }",
            "        double dot = 0.0;",
            "        for (int64_t l = 0; l < 16; ++l) dot += lanes_sum[l];",
            f"        for (; kk < K; ++kk) dot += (double){self.load(self.a, 'a_row[kk]')} * "
            f"(double){self.load(self.b, f'{b}[kk]')};",
            "        const int64_t tile_row = row % M, r = 0, tile_col = 0, j = 0, batch = row / M;",
            *self.store("(float)dot", depth=2),
            "    }"]

    def store(self, value: str, depth: int) -> list[str]:
        """Body of the store loop: the product, the fused epilogue, the writes."""
        pad = "    " * depth
        if self.matvec:
            out = [f"{pad}const int64_t m_index = tile_row + r, n_index = tile_col + j;"]
        else:
            out = [f"{pad}const int64_t m_index = block_row + r, n_index = tile_col + j;"]
        bias = " + " + self.load(self.bias, f"{self.bias.name}[n_index]") \
            if self.bias is not None and self.matvec else ""
        out.append(f"{pad}const float {self.node.name} = {value}{bias};")
        target = "(batch * M + m_index) * N + n_index"
        if self.ep is None:
            # a 16-bit product: the float32 sum rounded once, to nearest even, as it is stored
            stored = self.storage.stored(self.node.dtype, self.node.name)
            return out + [f"{pad}{self.out_name(self.node)}[{target}] = {stored};"]
        ep = self.ep
        regions = ep.regions
        if len(regions) == 1:
            out.append(f"{pad}const int64_t {regions[0].name} = m_index * N + n_index;")
        else:
            out.append(f"{pad}const int64_t {regions[-1].name} = n_index;")
            rest = "m_index"
            for r in reversed(regions[1:-1]):
                out.append(f"{pad}const int64_t {r.name} = {rest} % {r.size_name};")
                rest = f"({rest} / {r.size_name})"
            out.append(f"{pad}const int64_t {regions[0].name} = {rest};")
        writer = CppKernel(ep, self.o)
        writer.bound[self.node] = self.node.name
        writer.depth = depth
        writer.compute(ep.element_values(ep.outputs))
        for o in ep.outputs:
            writer.emit(f"{self.out_name(o)}[{target}] = {writer.value(o)};")
        self.helpers |= writer.f.used
        self.libm |= writer.f.libm
        return out + writer.lines

    def column_stored(self) -> bool:
        """B as stored has N as its last dim: (K, N), or the x (K, 1) of a matrix-vector
        product (a Linear's weight and a transposed B are (N, K))."""
        return self.kind != "nt" or (self.matvec and self.node.fn != "linear")

    def launcher(self, function: str) -> list[str]:
        a, b, ep = self.a, self.b, self.ep
        args = [a, b] + ([self.bias] if self.bias is not None else []) + self.ep_inputs + \
            (ep.scalars if ep else [])
        lines = [f"def {function}({', '.join(x.name for x in args)}):",
                 f'    """Runs {self.name} (see the C++ above)."""']
        if self.batched:
            lines += [f"    lhs, rhs = {a.name}.contiguous(), {b.name}.contiguous()",
                      "    batches, M, K = lhs.shape",
                      f"    N = rhs.shape[{1 if self.kind == 'nt' else 2}]",
                      "    shape = (batches, M, N)"]
        else:
            lines += [f"    lhs = {a.name}.reshape(-1, {a.name}.shape[-1]).contiguous()",
                      f"    rhs = {b.name}.contiguous()",
                      "    batches = 1",
                      "    M, K = lhs.shape",
                      f"    N = {'rhs.shape[-1]' if self.column_stored() else 'rhs.shape[0]'}",
                      f"    shape = (*{a.name}.shape[:-1], N)"]
        for x in self.ep_inputs:
            lines.append(f"    {x.name} = {x.name}.contiguous()")
        if ep:
            names = [r.size_name for r in ep.regions]
            lines.append(f"    {', '.join(names)} = {', '.join(r.expr for r in ep.regions)}"
                         if len(names) > 1 else f"    {names[0]} = {ep.regions[0].expr}")
        for o in self.outputs:
            shape = output_shape(ep.group, o) if ep else "shape"
            lines.append(f"    {o.name} = torch.empty({shape}, dtype={dtype_expr(o, [a, b])}, "
                         f"device=lhs.device)")
        call = [pointer(a, "lhs"), pointer(b, "rhs")] + \
            ([pointer(self.bias)] if self.bias is not None else []) + \
            [x.name for x in self.ep_inputs] + [pointer(o) for o in self.outputs] + \
            [f"float({s.name})" for s in (ep.scalars if ep else [])] + \
            ["batches", "M", "N", "K"] + ([r.size_name for r in ep.regions] if ep else [])
        lines.append(f"    kernels.{self.name}({', '.join(call)})")
        lines.append(f"    return {', '.join(o.name for o in self.outputs)}")
        return lines
