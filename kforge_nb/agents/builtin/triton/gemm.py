"""A tiled Triton matrix product with the pointwise ops after it fused (Triton tutorial 03).

Each program computes one BLOCK_M x BLOCK_N tile of C = A @ B, walking K in BLOCK_K slices;
the pointwise group that follows the product (bias, activation, scale, residual) is applied
to the accumulator tile before the one store. How the slices are multiplied depends on the
precision policy the candidate is written for (`TritonOptions.dot`):

* "bf16" / "fp16": the fp32 tiles are cast to 16 bits inside the kernel and multiplied on
  the tensor cores, accumulating in fp32 (only under the bf16 / fp16 policy);
* "tf32": `tl.dot(..., input_precision="tf32")`, tensor cores on fp32 (only under tf32);
* "ieee": `tl.dot(..., input_precision="ieee")`, exact fp32 products on the FMA units;
* "fma": the sum of broadcast products with `tl.sum`, exact fp32, for tiny shapes only.

K is summed in panels of PANEL_K (a running sum per panel, then the panels' sums), so a long
K is not one fp32 running sum. A product with one column (A @ x) is a matrix-vector product
instead (`matvec.py`: fp64 sums, no padded tile).

bf16 / fp16 operands (a product whose operands all have that dtype) are loaded as float32
(exactly; bf16 by its bits, as the pointwise kernels read it), multiplied as above, the bias
added in float32 and the sum rounded once to the 16-bit dtype at the store: torch's bf16
addmm accumulates in fp32 and rounds its result once.

On a GPU a small @triton.autotune list keyed on (M, N, K) picks the tiles; under the CPU
interpreter the launcher passes the options' tiles instead.
"""
from __future__ import annotations

from ..candidate import dtype_expr
from ..capture.ir import Node, transposed_source
from ..capture.partition import Group, Schedule
from ..elementwise import TritonFormulas
from ..kernel import KernelPlan
from . import matvec
from .group import distinct

# (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps) for Hopper-class GPUs. The tiles are
# loaded as fp32, so 3 stages of 128 x 128 x 64 use 192 KiB of shared memory.
TENSOR_CORE_CONFIGS = [(128, 256, 32, 3, 8), (128, 128, 64, 3, 8), (128, 128, 32, 4, 4),
                       (64, 128, 64, 4, 4)]
FMA_CONFIGS = [(128, 128, 32, 3, 8), (64, 128, 32, 3, 4), (64, 64, 32, 3, 4)]
PRODUCTS = {
    "bf16": "tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16), acc)  # bf16 tensor cores, fp32 sums",
    "fp16": "tl.dot(a.to(tl.float16), b.to(tl.float16), acc)  # fp16 tensor cores, fp32 sums",
    "tf32": 'tl.dot(a, b, acc, input_precision="tf32")  # tf32 tensor cores',
    "ieee": 'tl.dot(a, b, acc, input_precision="ieee")  # exact fp32 products',
    # "+ 0.0": Triton's combine pass turns a bare sum of broadcast products into a tl.dot,
    # in tf32 on the GPU (Triton <= 3.6); the add keeps them exact fp32 products
    "fma": "acc + tl.sum(a[:, :, None] * b[None, :, :] + 0.0, axis=1)  # exact fp32 products",
}
# K elements summed in one fp32 running sum before it is added to the total: a product whose
# K (at capture) is longer is summed in panels (a K of a million: 256 panel sums, not one
# running sum); a shorter one keeps the single loop, which Triton pipelines best
PANEL_K = 4096


def operands(node: Node) -> tuple[Node, Node, str, bool] | None:
    """(a, b as stored, "nt" when b is stored (N, K) else "nn", batched), or None when the
    kernel does not cover the product (it stays a vendor call)."""
    a, b = node.args[0], node.args[1]
    if not (isinstance(a, Node) and isinstance(b, Node)) or len(b.shape) not in (2, 3):
        return None
    batched = len(b.shape) == 3
    if batched and (len(a.shape) != 3 or a.shape[0] != b.shape[0]):
        return None
    if node.fn == "linear":
        return (a, b, "nt", False) if len(b.shape) == 2 else None
    source = transposed_source(b)
    return (a, source, "nt", batched) if source is not None else (a, b, "nn", batched)


def epilogue_for(plan: Schedule, matmul: Node) -> Group | None:
    """The pointwise group right after a 2-D product, if it only reads the product's tile."""
    found = operands(matmul)
    if found is None or found[3] or matmul in plan.graph.outputs:
        return None
    for g in plan.groups:
        if matmul in g.base_args and g.reductions() == [] and g.scan is None and \
                all(u in g.member_set for u in matmul.users) and tuple(g.base) == matmul.shape:
            n_ids = set(g.base_cover()[-1])
            m_ids = {f.id for f in g.fdims} - n_ids
            if all((p >= m_ids or not p & m_ids) and (p >= n_ids or not p & n_ids)
                   for p in g.uses.values()):
                return g
    return None


class TritonGemm:
    """The kernel and launcher for one product (and its epilogue, if any)."""

    def __init__(self, node: Node, name: str, options, epilogue: KernelPlan | None):
        self.node, self.name, self.o, self.ep = node, name, options, epilogue
        self.a, self.b, self.layout, self.batched = operands(node)
        bias = node.args[2] if len(node.args) > 2 else None
        self.bias = bias if isinstance(bias, Node) else None
        self.ep_inputs = [n for n in epilogue.inputs if n is not node] if epilogue else []
        self.scalars = epilogue.scalars if epilogue else []
        self.outputs = epilogue.outputs if epilogue else [node]
        # kernel parameters: one per role, even when one tensor plays two (x @ W + x)
        out_names = ["out_ptr"] if len(self.outputs) == 1 else \
            [f"{o.name}_out_ptr" for o in self.outputs]
        names = distinct(["a_ptr", "b_ptr"] + (["bias_ptr"] if self.bias is not None else []) +
                         [f"{n.name}_ptr" for n in self.ep_inputs] + out_names)
        start = 3 if self.bias is not None else 2
        self.ptr = dict(zip(self.ep_inputs, names[start:]))
        self.out_ptr = dict(zip(self.outputs, names[start + len(self.ep_inputs):]))
        self.pointer_params = names
        # one column of B: the matrix-vector body (fp64 sums; any dot setting gives the same)
        self.matvec = matvec.is_matvec(node, self.batched)
        # the tiles multiplied as tl.sum of broadcast products (PRODUCTS["fma"]), not tl.dot;
        # that product runs at the knobs' tile sizes, the others are autotuned on a GPU
        self.dot_by_sum = options.dot == "fma" and not self.matvec
        self.autotuned = not self.dot_by_sum
        self.f = TritonFormulas()         # bf16 / fp16 loads, the rounding and the store

    def load(self, operand: Node, read: str) -> str:
        """`read` (a tl.load of `operand`) as float32: bf16 / fp16 converted exactly."""
        return self.f.loaded(operand.dtype, read)

    # -- the kernel ------------------------------------------------------------------------------
    def kernel(self) -> str:
        params = self.pointer_params[:len(self.pointer_params) - len(self.outputs)] + \
            [s.name for s in self.scalars] + [self.out_ptr[o] for o in self.outputs] + \
            ["M", "N", "K", "stride_ab", "stride_am", "stride_ak", "stride_bb", "stride_bk",
             "stride_bn", "BLOCK_M: tl.constexpr", "BLOCK_N: tl.constexpr",
             "BLOCK_K: tl.constexpr", "GROUP_M: tl.constexpr"] + \
            (["INTERPRETER: tl.constexpr"] if self.o.dot == "bf16" else [])
        ops = sorted({m.origin or m.fn for m in self.ep.group.members if m.op != "host"}) \
            if self.ep else []
        lines = [f"def {self.name}({', '.join(params)}):",
                 f"    # C = A @ B{' + bias' if self.bias is not None else ''}"
                 f"{', then ' + ', '.join(ops) if ops else ''}"
                 f"{': one BLOCK_M x BLOCK_N tile of C per program.' if not self.matvec else '.'}",
                 *(matvec.body(self.a, self.b, self.load) if self.matvec else
                   self.tile_body())]
        if self.bias is not None:
            bias = self.load(self.bias, "tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0)")
            lines.append(f"    acc += {bias}[None, :]")
        values = {self.node: "acc"}
        if self.ep is not None:
            lines += self.epilogue(values)
        for x in self.outputs:
            # a 16-bit output: the float32 value rounded once, to nearest even, and stored
            value = self.f.stored(x.dtype, self.f.rounded(x.dtype, values[x]), self.out_ptr[x])
            lines.append(f"    tl.store({self.out_ptr[x]} + batch * M * N + offs_m[:, None] * N "
                         f"+ offs_n[None, :], {value}, mask=mask)")
        head = ["@triton.jit"]
        tail = []
        if self.autotuned:
            configs = TENSOR_CORE_CONFIGS if self.o.dot != "ieee" else FMA_CONFIGS
            listed = matvec.configs() if self.matvec else ",\n        ".join(
                f"triton.Config({{'BLOCK_M': {m}, 'BLOCK_N': {n}, 'BLOCK_K': {k}, 'GROUP_M': 8}}"
                f", num_stages={s}, num_warps={w})" for m, n, k, s, w in configs)
            tail = ["", "", "# On a GPU the autotuner times these tiles the first time a shape "
                    "is seen; under the", "# CPU interpreter the launcher passes one "
                    "configuration instead.", "if torch.cuda.is_available():",
                    f"    {self.name} = triton.autotune(configs=[\n        {listed},\n    ], "
                    f"key=['M', 'N', 'K'])({self.name})"]
        return "\n".join(head + lines + tail)

    def tile_body(self) -> list[str]:
        """The tiled product's lines from the program ids to the product in `acc`."""
        return [
            "    # Programs are ordered in groups of GROUP_M tile-rows so that neighbouring",
            "    # programs reuse the same tiles of B from the cache.",
            "    pid = tl.program_id(0)",
            "    batch = tl.program_id(1)",
            "    tiles_m, tiles_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)",
            "    group = pid // (GROUP_M * tiles_n)",
            "    first_m = group * GROUP_M",
            "    group_size = min(tiles_m - first_m, GROUP_M)",
            "    pid_m = first_m + (pid % (GROUP_M * tiles_n)) % group_size",
            "    pid_n = (pid % (GROUP_M * tiles_n)) // group_size",
            "    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
            "    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
            "    offs_k = tl.arange(0, BLOCK_K)",
            "    a_ptrs = a_ptr + batch * stride_ab + offs_m[:, None].to(tl.int64) * stride_am + "
            "offs_k[None, :] * stride_ak",
            "    b_ptrs = b_ptr + batch * stride_bb + offs_k[:, None] * stride_bk + "
            "offs_n[None, :] * stride_bn",
            *(self.panels() if self.a.shape[-1] > PANEL_K else
              self.k_loop("    ", "range(0, tl.cdiv(K, BLOCK_K))", "K - k * BLOCK_K")),
            "    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)"]

    def panels(self) -> list[str]:
        """K in panels of PANEL_K: each panel's products in a fp32 running sum of its own,
        the panels' sums added after, so a long K is not one running sum over all of it."""
        return [f"    # K in panels of {PANEL_K}: a fp32 running sum per panel, then the panels' sums",
                "    total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
                f"    for panel in range(0, K, {PANEL_K}):",
                *self.k_loop("        ", f"range(panel, min(panel + {PANEL_K}, K), BLOCK_K)",
                             "K - k"),
                "        total += acc",
                "    acc = total"]

    def k_loop(self, pad: str, steps: str, k_left: str) -> list[str]:
        """The running sum in `acc` of the products over `steps` (k: a step of BLOCK_K)."""
        body = [f"    k_left = {k_left}",
                "    a = " + self.load(self.a, "tl.load(a_ptrs, mask=(offs_m[:, None] < M) & "
                                      "(offs_k[None, :] < k_left), other=0.0)"),
                "    b = " + self.load(self.b, "tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & "
                                      "(offs_n[None, :] < N), other=0.0)"),
                *self.product(),
                "    a_ptrs += BLOCK_K * stride_ak",
                "    b_ptrs += BLOCK_K * stride_bk"]
        return [pad + "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
                pad + f"for k in {steps}:",
                *(pad + line for line in body)]

    def product(self) -> list[str]:
        if self.o.dot != "bf16":
            return [f"    acc = {PRODUCTS[self.o.dot]}"]
        return ["    if INTERPRETER:   # Triton's CPU interpreter multiplies bf16 tiles as integers:",
                "        # the same products, rounded to bf16 and multiplied exactly in fp32",
                "        acc = tl.dot(a.to(tl.bfloat16).to(tl.float32), "
                'b.to(tl.bfloat16).to(tl.float32), acc, input_precision="ieee")',
                "    else:",
                f"        acc = {PRODUCTS['bf16']}"]

    def epilogue(self, values: dict) -> list[str]:
        ep, f, lines = self.ep, TritonFormulas(), []
        g = ep.group
        n_ids = set(g.base_cover()[-1])
        for m in g.members:
            if m.op == "host":
                values[m] = values[ep.source(m)]
                continue
            args = []
            for k, arg in enumerate(m.args):
                if not isinstance(arg, Node):
                    args.append(f.lit(arg))
                elif ep.source(arg) in values:
                    args.append(values[ep.source(arg)])
                elif not arg.is_tensor:
                    args.append(arg.name)
                else:
                    pattern = g.uses[(m, k)]
                    has_n, has_m = bool(pattern & n_ids), bool(pattern - n_ids)
                    index = " + ".join(x for x in (
                        "offs_m[:, None] * N" if has_m and has_n else
                        ("offs_m[:, None]" if has_m else ""),
                        "offs_n[None, :]" if has_n else "") if x)
                    # a 0-d operand is one scalar: a block mask on its pointer does not build
                    args.append(f"tl.load({self.ptr[arg]} + {index}, mask=mask, other=0.0)"
                                if index else f"tl.load({self.ptr[arg]})")
            attrs = dict(m.attrs)
            if m.fn == "pow" and isinstance(m.args[1], (int, float)):
                attrs["exponent_value"] = m.args[1]
            lines.append(f"    {m.name} = {f.formula(m.fn, args, attrs)}")
            values[m] = m.name
        return lines

    # -- the launcher ----------------------------------------------------------------------------
    def arguments(self) -> list:
        """What the launcher takes: each tensor or number once, in first-use order."""
        args = [self.a, self.b] + ([self.bias] if self.bias is not None else []) + \
            self.ep_inputs + self.scalars
        return list(dict.fromkeys(args))

    def launcher(self, function: str) -> list[str]:
        a, b, o = self.a, self.b, self.o
        taken = {x.name for x in self.arguments()}
        lhs, rhs = distinct(sorted(taken) + ["lhs", "rhs"])[-2:]
        lines = [f"def {function}({', '.join(x.name for x in self.arguments())}):",
                 f'    """Launches {self.name}: the product'
                 f'{" and the ops after it" if self.ep else ""}."""']
        row, col = (-1, -2) if self.layout == "nt" else (-2, -1)    # B[k, n] as stored
        if self.batched:
            lines += [f"    {lhs}, {rhs} = {a.name}, {b.name}",
                      f"    batches, M, K = {lhs}.shape",
                      f"    N = {rhs}.shape[{-2 if self.layout == 'nt' else -1}]",
                      f"    strides_a = ({lhs}.stride(0), {lhs}.stride(1), {lhs}.stride(2))",
                      f"    strides_b = ({rhs}.stride(0), {rhs}.stride({row}), "
                      f"{rhs}.stride({col}))",
                      "    shape = (batches, M, N)"]
        else:
            lines += [f"    {lhs} = {a.name}.reshape(-1, {a.name}.shape[-1])",
                      f"    {rhs} = {b.name}",
                      "    batches = 1",
                      f"    M, K = {lhs}.shape",
                      f"    N = {rhs}.shape[{-2 if self.layout == 'nt' else -1}]",
                      f"    strides_a = (0, {lhs}.stride(0), {lhs}.stride(1))",
                      f"    strides_b = (0, {rhs}.stride({row}), {rhs}.stride({col}))",
                      f"    shape = (*{a.name}.shape[:-1], N)"]
        for n in self.ep_inputs:
            lines.append(f"    {n.name} = {n.name}.contiguous()")
        for x in self.outputs:
            lines.append(f"    {x.name} = torch.empty(shape, dtype={dtype_expr(x, [a, b])}, "
                         f"device={lhs}.device)")
        call = [lhs, rhs] + ([self.bias.name] if self.bias is not None else []) + \
            [n.name for n in self.ep_inputs] + [s.name for s in self.scalars] + \
            [x.name for x in self.outputs] + ["M", "N", "K", "*strides_a", "*strides_b"]
        if o.dot == "bf16":
            call.append('INTERPRETER=os.environ.get("TRITON_INTERPRET") == "1"')
        tiles = matvec.TILES if self.matvec else \
            f"BLOCK_M={o.block_m}, BLOCK_N={o.block_n}, BLOCK_K={o.block_k}, " \
            f"GROUP_M={o.group_m}, num_warps={o.num_warps}"
        if self.autotuned:
            lines += ["    grid = lambda meta: (triton.cdiv(M, meta['BLOCK_M']) * "
                      "triton.cdiv(N, meta['BLOCK_N']), batches)",
                      f"    tiles = {{}} if torch.cuda.is_available() else dict({tiles})",
                      f"    {self.name}[grid]({', '.join(call)}, **tiles)"]
        else:
            lines += [f"    grid = (triton.cdiv(M, {o.block_m}) * triton.cdiv(N, {o.block_n}), "
                      "batches)",
                      f"    {self.name}[grid]({', '.join(call)}, {tiles})"]
        lines.append(f"    return {', '.join(x.name for x in self.outputs)}")
        return lines
