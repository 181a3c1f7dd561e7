"""Triton kernels for the `triton` target, in the style of Triton's tutorials.

* A group without reductions is one flat kernel: each program owns BLOCK_SIZE consecutive
  output elements; operands that broadcast are read at the coordinates they vary along.
* A group with reductions runs one program per kept element (a "row"); each pass loops over
  the reduced elements BLOCK_SIZE at a time, then a final loop writes the outputs.
* A matrix product is a tiled kernel (tutorial 03); the pointwise group that follows it is
  applied to the accumulator tile before the store.

Products are exact fp32 (`tl.sum` of broadcast products) unless the options ask for tl.dot
in tf32, which only the tf32 precision policy accepts.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from . import candidate as cand
from .assemble import Built, kept_summary, lowered_ops
from .capture import Captured
from .elementwise import Formulas
from .ir import Node
from .kernel import KernelPlan, kernel_name
from .partition import Group, Plan, Region


@dataclass
class TritonOptions:
    block_size: int = 1024            # elements per program (pointwise) or per loop step
    num_warps: int = 4
    num_stages: int = 2
    autotune: bool = False            # let @triton.autotune choose BLOCK_SIZE and num_warps
    block_m: int = 32                 # matmul tiles
    block_n: int = 32
    block_k: int = 8
    group_m: int = 8
    dot: str = "fma"                  # "fma": exact fp32 products; "tf32": tl.dot, tensor cores


AUTOTUNE_CONFIGS = [(256, 2), (1024, 4), (4096, 8)]


class TritonGroupKernel:
    """One @triton.jit kernel and its launcher for a fused group."""

    def __init__(self, plan: KernelPlan, options: TritonOptions):
        self.plan, self.o = plan, options
        self.f = Formulas("triton")
        self.lines: list[str] = []
        self.depth = 1
        self.loaded: dict = {}
        self.ptr = {n: f"{n.name}_ptr" for n in plan.inputs}
        self.out_ptr = {o: ("out_ptr" if len(plan.outputs) == 1 else f"{o.name}_out_ptr")
                        for o in plan.outputs}

    def emit(self, line: str = "") -> None:
        self.lines.append("    " * self.depth + line)

    # -- indices -------------------------------------------------------------------------------
    def coordinates(self, regions: list[Region], flat: str) -> None:
        """Split a flat index into one coordinate per region (row-major)."""
        rest = flat
        for r in reversed(regions[1:]):
            self.emit(f"{r.name} = {rest} % {r.size_name}")
            rest = f"{rest} // {r.size_name}"
        self.emit(f"{regions[0].name} = {rest}")

    @staticmethod
    def horner(regions: list[Region]) -> str:
        expr = ""
        for r in regions:
            expr = r.name if not expr else f"({expr}) * {r.size_name} + {r.name}"
        return expr or "0"

    def load(self, node: Node, user: Node, k: int, mask: str) -> str:
        pattern = self.plan.group.uses[(user, k)]
        key = (node, pattern)
        if key not in self.loaded:
            name = node.name if not any(n is node for n, _ in self.loaded) else \
                f"{node.name}_{len(self.loaded)}"
            regions = self.plan.index_regions(pattern)
            index = self.flat if regions == self.plan.regions and self.flat else \
                self.horner(regions)
            if self.flat or any(r.reduced for r in regions):
                self.emit(f"{name} = tl.load({self.ptr[node]} + {index}, mask={mask}, "
                          "other=0.0)")
            else:    # varies only with this program's kept coordinates: one scalar
                self.emit(f"{name} = tl.load({self.ptr[node]} + {index})")
            self.loaded[key] = name
        return self.loaded[key]

    def value(self, node, user: Node | None = None, k: int = 0, mask: str = "mask") -> str:
        if not isinstance(node, Node):
            return self.f.lit(node)
        src = self.plan.source(node)
        if src in self.plan.group.member_set:
            return src.name
        if not src.is_tensor:
            return src.name
        return self.load(src, user, k, mask)

    def compute(self, nodes: list[Node], mask: str = "mask") -> None:
        for m in nodes:
            if m.op == "scan":
                v = self.value(m.args[0], m, 0, mask)
                # in float64, as torch's cumsum accumulates on the CPU
                self.emit(f"{m.name}_terms = tl.where({mask}, {v}, 0.0).to(tl.float64)")
                self.emit(f"{m.name} = (tl.cumsum({m.name}_terms, axis=0) + {m.name}_carry)"
                          ".to(tl.float32)")
                self.emit(f"{m.name}_carry += tl.sum({m.name}_terms, axis=0)")
                continue
            args = [self.value(a, m, k, mask) for k, a in enumerate(m.args)]
            attrs = dict(m.attrs)
            if m.fn == "pow" and isinstance(m.args[1], (int, float)):
                attrs["exponent_value"] = m.args[1]
            self.emit(f"{m.name} = {self.f.formula(m.fn, args, attrs)}")

    # -- kernels -------------------------------------------------------------------------------
    def params(self) -> list[str]:
        p = self.plan
        return [self.ptr[n] for n in p.inputs] + [self.out_ptr[o] for o in p.outputs] + \
            [s.name for s in p.scalars] + [r.size_name for r in p.regions]

    def write(self) -> str:
        p = self.plan
        head = ["@triton.jit"]
        head.append(f"def {p.name}({', '.join(self.params() + ['BLOCK_SIZE: tl.constexpr'])}):")
        head += [f"    # {line}" for line in p.story()]
        self.flat = ""
        if not p.reduce:
            self.write_flat()
        else:
            self.write_rows()
        tail = []
        if self.o.autotune:
            configs = ",\n        ".join(f"triton.Config({{'BLOCK_SIZE': {b}}}, num_warps={w})"
                                         for b, w in AUTOTUNE_CONFIGS)
            tail = ["", "", "# The autotuner times each configuration on the GPU the first time a "
                    "shape is seen;", "# under the CPU interpreter the launcher passes one "
                    "configuration instead.", "if torch.cuda.is_available():",
                    f"    {p.name} = triton.autotune(configs=[\n        {configs},\n    ], "
                    f"key={[r.size_name for r in p.regions]!r})({p.name})"]
        return "\n".join(head + self.lines + tail)

    def write_flat(self) -> None:
        p = self.plan
        total = " * ".join(r.size_name for r in p.regions)
        self.emit("pid = tl.program_id(0)")
        self.emit("offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)")
        self.emit(f"mask = offsets < {total}")
        self.flat = "offsets"
        if any(p.index_regions(key) != p.regions for key in p.group.uses.values()):
            self.emit("# coordinates along the dims some operands broadcast over")
            self.coordinates(p.regions, "offsets")
        self.compute(p.element_values(p.full_outputs()))
        for o in p.full_outputs():
            self.emit(f"tl.store({self.out_ptr[o]} + offsets, {self.value(o)}, mask=mask)")

    def write_rows(self) -> None:
        p = self.plan
        kept = [r for r in p.regions if not r.reduced]
        self.emit("program = tl.program_id(0)      # one program per kept element")
        if kept:
            self.coordinates(kept, "program")
        reduce_total = " * ".join(r.size_name for r in p.reduce)
        self.emit(f"reduce_count = {reduce_total}")
        for number, reductions in enumerate(p.passes):
            self.emit(f"# pass {number + 1}: " + ", ".join(f"{r.fn} ({r.name})"
                                                          for r in reductions))
            for r in reductions:
                init = {"sum": "0.0", "mean": "0.0", "max": 'float("-inf")',
                        "min": 'float("inf")', "first_index": "2**62"}[r.fn]
                dtype = "tl.int64" if r.fn == "first_index" else "tl.float32"
                self.emit(f"{r.name}_acc = tl.full([BLOCK_SIZE], {init}, {dtype})")
            self.open_reduce_loop()
            self.compute(p.element_values([r.args[0] for r in reductions]), mask="in_range")
            for r in reductions:
                self.combine(r)
            self.depth -= 1
            self.loaded = {}
            for r in reductions:
                self.finish(r)
            self.compute([m for m in p.element_values(
                [a for n in p.kept_after[number] for a in n.node_args()], kept_scope=True)
                if m not in p.kept_after[number]], mask="True")
            self.compute(p.kept_after[number], mask="True")
        for o in p.kept_outputs():
            self.emit(f"tl.store({self.out_ptr[o]} + program, {self.value(o)})")
        if p.full_outputs():
            self.emit("# final pass: compute and write the full-size outputs")
            if p.group.scan is not None:
                self.emit(f"{p.group.scan.name}_carry = tl.zeros([], tl.float64)")
            self.open_reduce_loop()
            self.compute(p.element_values(p.full_outputs()), mask="in_range")
            index = self.horner(p.regions)
            for o in p.full_outputs():
                self.emit(f"tl.store({self.out_ptr[o]} + {index}, {self.value(o)}, "
                          "mask=in_range)")
            self.depth -= 1

    def open_reduce_loop(self) -> None:
        p = self.plan
        total = " * ".join(r.size_name for r in p.reduce)
        self.loaded = {}
        self.emit(f"for start in range(0, {total}, BLOCK_SIZE):")
        self.depth += 1
        self.emit("r = start + tl.arange(0, BLOCK_SIZE)")
        self.emit(f"in_range = r < {total}")
        self.coordinates(p.reduce, "r")

    def combine(self, r: Node) -> None:
        v = self.value(r.args[0], r, 0, "in_range")
        acc = f"{r.name}_acc"
        if r.fn in ("sum", "mean"):
            self.emit(f"{acc} += tl.where(in_range, {v}, 0.0)")
        elif r.fn == "first_index":
            self.emit(f"{acc} = tl.minimum({acc}, tl.where(in_range & ({v} != 0.0), "
                      "r.to(tl.int64), 2**62))   # the first index where x hits the max")
        else:
            fn, other = ("maximum", 'float("-inf")') if r.fn == "max" else ("minimum",
                                                                          'float("inf")')
            self.emit(f"{acc} = tl.{fn}({acc}, tl.where(in_range, {v}, {other}))")

    def finish(self, r: Node) -> None:
        acc = f"{r.name}_acc"
        if r.fn == "mean":
            correction = r.attrs.get("correction") or 0
            divisor = f"(reduce_count - {correction})" if correction else "reduce_count"
            self.emit(f"{r.name} = tl.sum({acc}, axis=0) / {divisor}")
        elif r.fn == "sum":
            self.emit(f"{r.name} = tl.sum({acc}, axis=0)")
        elif r.fn == "first_index":
            self.emit(f"{r.name} = tl.min({acc}, axis=0)")
        else:
            self.emit(f"{r.name} = tl.{r.fn}({acc}, axis=0)")


def launcher(kp: KernelPlan, options: TritonOptions, name: str) -> list[str]:
    g = kp.group
    args = [n.name for n in kp.inputs] + [s.name for s in kp.scalars]
    lines = [f"def {name}({', '.join(args)}):",
             f'    """Launches {kp.name}: {kp.story()[0].lower().rstrip(".")}."""']
    for n in kp.inputs:
        lines.append(f"    {n.name} = {n.name}.contiguous()")
    lines.append(f"    shape = {cand.base_shape(g)}")
    names = [r.size_name for r in kp.regions]
    exprs = [r.expr for r in kp.regions]
    lines.append(f"    {', '.join(names)} = {', '.join(exprs)}" if len(names) > 1 else
                 f"    {names[0]} = {exprs[0]}")
    device = kp.inputs[0].name + ".device" if kp.inputs else "'cpu'"
    for o in kp.outputs:
        lines.append(f"    {o.name} = torch.empty({cand.output_shape(g, o)}, dtype={o.dtype}, "
                     f"device={device})")
    if kp.reduce:
        kept = " * ".join(r.size_name for r in kp.regions if not r.reduced) or "1"
        lines.append(f"    grid = ({kept},)")
    else:
        total = " * ".join(names)
        lines.append(f"    grid = lambda meta: (triton.cdiv({total}, meta['BLOCK_SIZE']),)")
    call = [n.name for n in kp.inputs] + [o.name for o in kp.outputs] + \
        [s.name for s in kp.scalars] + names
    if options.autotune:
        lines.append(f"    tuning = {{}} if torch.cuda.is_available() else "
                     f"{{'BLOCK_SIZE': {options.block_size}, 'num_warps': {options.num_warps}}}")
        lines.append(f"    {kp.name}[grid]({', '.join(call)}, **tuning)")
    else:
        lines.append(f"    {kp.name}[grid]({', '.join(call)}, BLOCK_SIZE={options.block_size}, "
                     f"num_warps={options.num_warps})")
    lines.append(f"    return {', '.join(o.name for o in kp.outputs)}")
    return lines


# --- matrix products ------------------------------------------------------------------------

def epilogue_for(plan: Plan, matmul: Node) -> Group | None:
    """The pointwise group right after a 2-D-able product, if it only reads the product's tile."""
    if matmul.fn == "bmm" or len(matmul.shape) < 2:
        return None
    a = matmul.args[1]
    if len(a.shape) != 2:
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


def matmul_kernel(node: Node, name: str, options: TritonOptions, epilogue: KernelPlan | None
                  ) -> tuple[list[str], list[str], list, list]:
    """(kernel lines, launcher lines, launcher args, outputs) for a product (+ epilogue)."""
    bias = len(node.args) > 2
    batched = node.fn == "bmm" or (node.fn == "matmul" and len(node.args[1].shape) == 3)
    o = options
    f = Formulas("triton")
    params = ["a_ptr", "b_ptr"] + (["bias_ptr"] if bias else [])
    ep_inputs, ep_outputs = [], [node]
    body_epilogue = []
    if epilogue is not None:
        ep_inputs = [n for n in epilogue.inputs if n is not node]
        ep_outputs = epilogue.outputs
        params += [f"{n.name}_ptr" for n in ep_inputs]
        params += [f"{s.name}" for s in epilogue.scalars]
    params += ["out_ptr" if len(ep_outputs) == 1 else f"{x.name}_out_ptr" for x in ep_outputs]
    params += ["M", "N", "K", "stride_ab", "stride_am", "stride_ak", "stride_bb", "stride_bk",
               "stride_bn", "BLOCK_M: tl.constexpr", "BLOCK_N: tl.constexpr",
               "BLOCK_K: tl.constexpr", "GROUP_M: tl.constexpr"]
    product = ("tl.dot(a, b, acc)" if o.dot == "tf32" else
               "acc + tl.sum(a[:, :, None] * b[None, :, :], axis=1)")
    lines = ["@triton.jit", f"def {name}({', '.join(params)}):",
             f"    # C = A @ B{' + bias' if bias else ''}"
             f"{', then ' + ', '.join(sorted({m.origin or m.fn for m in epilogue.group.members})) if epilogue else ''}"
             ", one BLOCK_M x BLOCK_N tile of C per program.",
             "    # Programs are ordered in groups of GROUP_M tile-rows so that neighbouring",
             "    # programs reuse the same tiles of B from the cache (Triton tutorial 03).",
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
             "    a_ptrs = a_ptr + batch * stride_ab + offs_m[:, None] * stride_am + "
             "offs_k[None, :] * stride_ak",
             "    b_ptrs = b_ptr + batch * stride_bb + offs_k[:, None] * stride_bk + "
             "offs_n[None, :] * stride_bn",
             "    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
             "    for k in range(0, tl.cdiv(K, BLOCK_K)):",
             "        k_left = K - k * BLOCK_K",
             "        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), "
             "other=0.0)",
             "        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), "
             "other=0.0)",
             f"        acc = {product}" + ("" if o.dot == "tf32" else
                                             "  # exact fp32 products"),
             "        a_ptrs += BLOCK_K * stride_ak",
             "        b_ptrs += BLOCK_K * stride_bk",
             "    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)"]
    if bias:
        lines.append("    acc += tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0)[None, :]")
    values = {node: "acc"}
    if epilogue is not None:
        g = epilogue.group
        n_ids = set(g.base_cover()[-1])
        for m in epilogue.group.members:
            if m.op == "host":
                values[m] = values[epilogue.source(m)]
                continue
            args = []
            for k, arg in enumerate(m.args):
                if not isinstance(arg, Node):
                    args.append(f.lit(arg))
                elif epilogue.source(arg) in values:
                    args.append(values[epilogue.source(arg)])
                elif not arg.is_tensor:
                    args.append(arg.name)
                else:
                    pattern = g.uses[(m, k)]
                    has_n, has_m = bool(pattern & n_ids), bool(pattern - n_ids)
                    index = " + ".join(x for x in (
                        "offs_m[:, None] * N" if has_m and has_n else
                        ("offs_m[:, None]" if has_m else ""),
                        "offs_n[None, :]" if has_n else "") if x) or "0"
                    args.append(f"tl.load({arg.name}_ptr + {index}, mask=mask, other=0.0)")
            attrs = dict(m.attrs)
            if m.fn == "pow" and isinstance(m.args[1], (int, float)):
                attrs["exponent_value"] = m.args[1]
            body_epilogue.append(f"    {m.name} = {f.formula(m.fn, args, attrs)}")
            values[m] = m.name
        lines += body_epilogue
    for x in ep_outputs:
        ptr = "out_ptr" if len(ep_outputs) == 1 else f"{x.name}_out_ptr"
        lines.append(f"    tl.store({ptr} + batch * M * N + offs_m[:, None] * N + offs_n[None, :],"
                     f" {values[x]}, mask=mask)")

    # the launcher
    a, b = node.args[0], node.args[1]
    launch_args = [a, b] + ([node.args[2]] if bias else []) + ep_inputs + \
        (epilogue.scalars if epilogue else [])
    names = [x.name for x in launch_args]
    fn = f"fused_{name[:-len('_kernel')]}"
    py = [f"def {fn}({', '.join(names)}):",
          f'    """Launches {name}: the product{" and its epilogue" if epilogue else ""}."""']
    if batched:
        py += [f"    a, b = {a.name}.contiguous(), {b.name}.contiguous()",
               "    batches, M, K = a.shape",
               "    N = b.shape[-1]",
               "    strides_a = (a.stride(0), a.stride(1), a.stride(2))",
               "    strides_b = (b.stride(0), b.stride(1), b.stride(2))"]
    else:
        py += [f"    a = {a.name}.reshape(-1, {a.name}.shape[-1]).contiguous()",
               "    M, K = a.shape",
               "    batches = 1",
               "    strides_a = (0, a.stride(0), a.stride(1))"]
        if node.fn == "linear":   # B = weight.T: element (k, n) is weight[n, k]
            py += [f"    b = {b.name}", "    N = b.shape[0]",
                   "    strides_b = (0, b.stride(1), b.stride(0))"]
        else:
            py += [f"    b = {b.name}", "    N = b.shape[1]",
                   "    strides_b = (0, b.stride(0), b.stride(1))"]
    for n in ep_inputs:
        py.append(f"    {n.name} = {n.name}.contiguous()")
    for x in ep_outputs:
        py.append(f"    {x.name} = torch.empty((batches * M, N), dtype=torch.float32, "
                  f"device=a.device)")
    py.append(f"    grid = (triton.cdiv(M, {o.block_m}) * triton.cdiv(N, {o.block_n}), batches)")
    call = ["a", "b"] + ([node.args[2].name] if bias else []) + [n.name for n in ep_inputs] + \
        ([s.name for s in epilogue.scalars] if epilogue else []) + [x.name for x in ep_outputs]
    py.append(f"    {name}[grid]({', '.join(call)}, M, N, K, *strides_a, *strides_b, "
              f"BLOCK_M={o.block_m}, BLOCK_N={o.block_n}, BLOCK_K={o.block_k}, "
              f"GROUP_M={o.group_m}, num_warps={o.num_warps})")
    shape = "(batches, M, N)" if batched else f"tuple({a.name}.shape[:-1]) + (N,)"
    py.append(f"    return {', '.join(f'{x.name}.reshape({shape})' for x in ep_outputs)}")
    return lines, py, launch_args, ep_outputs


def triton_candidate(title: str, source: str, cap: Captured, plan: Plan,
                     options: TritonOptions) -> Built:
    allow, labels = kept_summary(plan, vendor_matmul=False)
    if not plan.groups and not any(kind == "matmul" for kind, _ in plan.steps):
        return Built(None, allow, failure="builtin agent cannot lower: " +
                     (", ".join(labels) or "nothing") + " (no work left to put in a kernel)")
    taken: set[str] = set()
    kernels, launchers, launches, story = [], [], {}, []
    matmul_lines: dict = {}
    fused_groups = set()
    for at, (kind, item) in enumerate(plan.steps):
        if kind != "matmul":
            continue
        group = epilogue_for(plan, item)
        if group is not None:      # Python steps in between must not feed the epilogue
            end = next(i for i, (k, x) in enumerate(plan.steps) if k == "group" and x is group)
            between = {x for k, x in plan.steps[at + 1:end] if k != "group"}
            if between & set(KernelPlan.build(group, "probe").inputs):
                group = None
        kp = None
        base = f"{item.fn}"
        if group is not None:
            kp = KernelPlan.build(group, kernel_name(group, set()))
            base += "_" + "_".join(dict.fromkeys(m.origin or m.fn for m in group.members
                                                 if m.op != "host"))
            fused_groups.add(group.index)
        name = f"{base}_kernel"
        k = 2
        while name in taken:
            name, k = f"{base}_kernel_{k}", k + 1
        taken.add(name)
        lines, py, args, outs = matmul_kernel(item, name, options, kp)
        kernels.append("\n".join(lines))
        launchers.append("\n".join(py))
        call = f"fused_{name[:-len('_kernel')]}({', '.join(cand.python_ref(a) for a in args)})"
        matmul_lines[item] = [f"{', '.join(x.name for x in outs)} = {call}"]
        story.append(f"- `{name}` (Triton): tiled matrix product" +
                     (" with the following pointwise ops applied to the tile" if kp else ""))
    for group in plan.groups:
        if group.index in fused_groups:
            continue
        name = kernel_name(group, taken)
        kp = KernelPlan.build(group, name)
        kernels.append(TritonGroupKernel(kp, options).write())
        launcher_name = "fused_" + name[:-len("_kernel")]
        launchers.append("\n".join(launcher(kp, options, launcher_name)))
        launches[group.index] = (launcher_name, kp.inputs + kp.scalars, kp.outputs)
        story.append(f"- `{name}` (Triton): {kp.story()[0]}")
    support, init = cand.reference_parts(source)
    body = cand.forward_lines(plan, launches, lambda node: matmul_lines[node])
    doc = story + ([f"- kept in torch: {', '.join(labels)}"] if labels else []) + \
        [f"- {n}" for n in cap.notes]
    parts = [
        cand.docstring(f"{title}: Triton kernels written by kforge-nb's builtin agent (no LLM).",
                       doc),
        "import math\n\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
        "import triton\nimport triton.language as tl",
        "\n\n".join(s for s in support if s and not s.startswith(("import torch", "from torch",
                                                                   "import math"))),
        cand.header_line("triton", dataclasses.asdict(options)),
        "\n\n\n".join(kernels),
        "\n\n\n".join(launchers),
        cand.model_class(init, [n.name for n in plan.graph.inputs], body),
    ]
    code = "\n\n\n".join(p for p in parts if p.strip()) + "\n"
    ops = lowered_ops(plan) + [f"{kind_}" for kind_, it in plan.steps if kind_ == "matmul"]
    coverage = [f"lowered to Triton: {', '.join(dict.fromkeys(ops))} in {len(kernels)} kernel(s)"]
    if labels:
        coverage.append(f"left to torch: {', '.join(labels)}")
    coverage += cap.notes
    return Built(code, allow, coverage, [k.split("\n")[1] if k.startswith("@") else k
                                         for k in kernels])


__all__ = ["TritonOptions", "triton_candidate"]
