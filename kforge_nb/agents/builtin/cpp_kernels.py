"""C++ (OpenMP) kernels for the `cpp` target, one `extern "C"` function per fused group.

Shape of every kernel: the kept ("row") dims are split across threads with
`#pragma omp parallel for`; inside a task, each pass walks the reduced dims with the innermost
loop under `#pragma omp simd`. When the innermost dim is not reduced (RMS norm over channels of
an NCHW tensor), it becomes a block of *lanes*: each task owns LANE_BLOCK consecutive lanes and
keeps one accumulator per lane, so the simd loop still runs over contiguous memory. A reduction
over everything (a Frobenius norm) parallelises the reduction loop itself.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .cpp_math import helpers_source
from .elementwise import Formulas
from .ir import Node
from .kernel import KernelPlan


@dataclass
class CppOptions:
    vector_math: bool = True          # vectorisable exp/log/tanh/erf helpers instead of libm
    lane_block: int = 256             # lanes per task when the innermost dim is kept
    min_parallel_work: int = 32768    # below this many elements a kernel runs on one thread
    accumulate: str = "auto"          # "float", "double", or "auto" (double past 16384 terms)
    schedule: str = "static"          # OpenMP schedule of the row loop
    matmul: str = "vendor"            # "vendor": torch's GEMM; "kernel": the C++ tiled GEMM
    reuse_output: bool = True         # park an exp computed in the last pass in the output


REDUCTION_OP = {"sum": "+", "mean": "+", "max": "max", "min": "min", "first_index": "min"}


def ctype(node: Node) -> str:
    return {torch.int64: "int64_t"}.get(node.dtype, "float")


class CppKernel:
    def __init__(self, plan: KernelPlan, options: CppOptions):
        self.plan, self.o = plan, options
        self.f = Formulas("cpp" if options.vector_math else "std")
        self.lines: list[str] = []
        self.depth = 0
        self.lanes = plan.lane is not None and bool(plan.reduce)   # blocks of lanes, per task
        self.out_name = {o: ("out" if len(plan.outputs) == 1 else f"{o.name}_out")
                         for o in plan.outputs}
        self.bound: dict = {}       # external nodes already held in a variable (a GEMM tile)
        self.hoisted: set = set()   # free values already computed for the whole row
        self.inverted: set = set()

    # -- small writers ----------------------------------------------------------------------
    def emit(self, line: str = "") -> None:
        self.lines.append("    " * self.depth + line if line else "")

    def open(self, line: str) -> None:
        self.emit(line + " {")
        self.depth += 1

    def close(self) -> None:
        self.depth -= 1
        self.emit("}")

    def index(self, regions) -> str:
        """Row-major offset over `regions` (Horner form), e.g. (row * cols + col)."""
        expr = ""
        for r in regions:
            expr = r.name if not expr else f"({expr}) * {r.size_name} + {r.name}" \
                if "+" in expr else f"{expr} * {r.size_name} + {r.name}"
        return expr or "0"

    def load(self, node: Node, user: Node, k: int) -> str:
        pattern = self.plan.group.uses[(user, k)]
        return f"{node.name}[{self.index(self.plan.index_regions(pattern))}]"

    def value(self, node, user: Node | None = None, k: int = 0) -> str:
        """The C++ expression for an operand of `user` (or a member) in the current scope."""
        if not isinstance(node, Node):
            return self.f.lit(node)
        plan = self.plan
        src = plan.source(node)
        if src in self.bound:
            return self.bound[src]
        if src in plan.group.member_set:
            if plan.space(src) == "kept" and self.lanes:
                return f"{src.name}[slot]"
            return src.name
        if not src.is_tensor:
            return src.name
        return self.load(src, user, k)

    def divisors(self) -> set:
        """Per-row values that elements are divided by: divide once, multiply per element."""
        p = self.plan
        if self.lanes:
            return set()
        return {p.source(m.args[1]) for m in p.group.members
                if m.fn == "div" and isinstance(m.args[1], Node) and p.space(m) == "full"
                and p.space(p.source(m.args[1])) == "kept"}

    def reciprocal(self, node: Node) -> None:
        if node in self.inverted:
            self.emit(f"const float {node.name}_inv = 1.0f / {node.name};")

    def formula(self, m: Node) -> str:
        if m.fn == "div" and isinstance(m.args[1], Node) and \
                self.plan.source(m.args[1]) in self.inverted and self.plan.space(m) == "full":
            divisor = self.plan.source(m.args[1])
            return f"({self.value(m.args[0], m, 0)} * {divisor.name}_inv)"
        args = [self.value(a, m, k) for k, a in enumerate(m.args)]
        attrs = dict(m.attrs)
        if m.fn == "pow" and isinstance(m.args[1], (int, float)):
            attrs["exponent_value"] = m.args[1]
        self.f.current, self.f.pending = m.name, []
        expr = self.f.formula(m.fn, args, attrs)
        for name, sub in self.f.pending:
            self.emit(f"const float {name} = {sub};")
        return expr

    def row_invariant(self, m: Node) -> bool:
        """A free value that only reads operands indexed by this task's row coordinates."""
        plan = self.plan
        if plan.space(m) != "free":
            return False
        rows = {id(r) for r in plan.rows}
        for k, a in enumerate(m.args):
            if not isinstance(a, Node) or not a.is_tensor:
                continue
            src = plan.source(a)
            if src in plan.group.member_set:
                if not self.row_invariant(src):
                    return False
            elif any(id(r) not in rows for r in plan.index_regions(plan.group.uses[(m, k)])):
                return False
        return True

    def hoist(self) -> None:
        """Compute the row-invariant free values once per task, outside the inner loops."""
        hoisted = [m for m in self.plan.group.members if self.row_invariant(m)]
        if hoisted:
            self.emit("// the same for every element of this row: computed once")
            self.compute(hoisted)
            self.hoisted.update(hoisted)

    def compute(self, nodes: list[Node], assign_kept: bool = False) -> None:
        nodes = [m for m in nodes if m not in self.hoisted]
        for m in nodes:
            if m.op == "scan":        # the running sum so far, in the sequential scan loop
                acc = f"{m.name}_acc" + ("[slot]" if self.lanes else "")
                self.emit(f"{acc} += {self.value(m.args[0], m, 0)};")
                self.emit(f"const float {m.name} = (float){acc};")
            elif assign_kept and self.lanes:
                self.emit(f"{m.name}[slot] = {self.formula(m)};")
            elif assign_kept:
                self.emit(f"const float {m.name} = {self.formula(m)};")
                self.reciprocal(m)
            else:
                self.emit(f"const float {m.name} = {self.formula(m)};")

    # -- the kernel ---------------------------------------------------------------------------
    def signature(self) -> str:
        p = self.plan
        params = [f"const float* {n.name}" for n in p.inputs]
        params += [f"{ctype(o)}* {self.out_name[o]}" for o in p.outputs]
        params += [f"float {s.name}" for s in p.scalars]
        params += [f"int64_t {r.size_name}" for r in p.regions]
        return f'extern "C" void {p.name}({", ".join(params)})'

    def write(self) -> str:
        p = self.plan
        self.inverted = self.divisors()
        for line in p.story():
            self.emit(f"// {line}")
        self.open(self.signature())
        total = " * ".join(r.size_name for r in p.regions)
        self.emit(f"const int64_t elements = {total};")
        if any(r.fn in ("mean", "first_index") for s in p.passes for r in s):
            count = " * ".join(r.size_name for r in p.reduce)
            self.emit(f"const int64_t reduce_count = {count};  // elements per reduction")
        if not p.rows and not p.lane:
            self.write_global()
        else:
            self.write_tasks()
        self.close()
        return "\n".join(self.lines)

    def parallel(self, extra: str = "") -> str:
        # dynamic scheduling hands out whole rows; a flat element loop stays static
        schedule = self.o.schedule if not extra else "static"
        pragma = f"#pragma omp parallel for{extra} schedule({schedule})"
        if not self.o.min_parallel_work:
            return pragma
        if "simd" in extra:
            # with `simd`, GCC compiles an if(...) clause's serial fallback unvectorised; a
            # team of one keeps the single, vectorised version
            return (f"{pragma} num_threads(elements >= {self.o.min_parallel_work} ? "
                    "omp_get_max_threads() : 1)")
        return f"{pragma} if(elements >= {self.o.min_parallel_work})"

    def write_tasks(self) -> None:
        """Threads over rows (and blocks of lanes); passes inside each task."""
        p = self.plan
        if not p.rows and not p.reduce:          # one flat elementwise loop
            self.write_flat()
            return
        rows = " * ".join(r.size_name for r in p.rows) or "1"
        if self.lanes:
            self.emit(f"const int64_t lane_blocks = ({p.lane.size_name} + LANE_BLOCK - 1) / "
                      "LANE_BLOCK;")
            self.emit(f"const int64_t tasks = {rows} * lane_blocks;")
        else:
            self.emit(f"const int64_t tasks = {rows};")
        self.emit(self.parallel())
        self.open("for (int64_t task = 0; task < tasks; ++task)")
        rest = "task"
        if self.lanes:
            self.emit("const int64_t lane_begin = (task % lane_blocks) * LANE_BLOCK;")
            self.emit(f"const int64_t lane_count = std::min<int64_t>(LANE_BLOCK, "
                      f"{p.lane.size_name} - lane_begin);")
            rest = "task / lane_blocks"
        if len(p.rows) == 1:
            self.emit(f"const int64_t {p.rows[0].name} = {rest};")
        elif p.rows:
            self.emit(f"int64_t rest = {rest};")
            for r in reversed(p.rows[1:]):
                self.emit(f"const int64_t {r.name} = rest % {r.size_name};")
                self.emit(f"rest /= {r.size_name};")
            self.emit(f"const int64_t {p.rows[0].name} = rest;")
        self.hoist()
        for number, reductions in enumerate(p.passes):
            self.write_pass(number, reductions)
            self.write_kept(p.kept_after[number])
        self.write_kept_outputs()
        self.write_final_pass()
        self.close()

    def write_flat(self) -> None:
        """One elementwise loop. Small inputs get their own serial simd loop: GCC compiles
        `parallel for simd if(...)`'s serial fallback without vectorising it (measured: 9 us
        instead of 1.7 us for 12k elements)."""
        r = self.plan.lane
        loop = f"for (int64_t {r.name} = 0; {r.name} < {r.size_name}; ++{r.name})"
        if self.o.min_parallel_work:
            self.open(f"if (elements < {self.o.min_parallel_work})")
            self.emit("#pragma omp simd")
            self.open(loop)
            self.write_final_pass()
            self.close()
            self.emit("return;")
            self.close()
        self.emit("#pragma omp parallel for simd schedule(static)")
        self.open(loop)
        self.write_final_pass()
        self.close()

    def lane_loop(self) -> None:
        """The innermost, vectorised loop over the lanes this task owns."""
        lane = self.plan.lane
        self.emit("#pragma omp simd")
        if self.lanes:
            self.open("for (int64_t slot = 0; slot < lane_count; ++slot)")
            self.emit(f"const int64_t {lane.name} = lane_begin + slot;")
        else:
            self.open(f"for (int64_t {lane.name} = 0; {lane.name} < {lane.size_name}; "
                      f"++{lane.name})")

    def reduce_loops(self, clause: str = "", simd: bool = True) -> int:
        """Open one loop per reduced region; the innermost gets the simd pragma. Returns depth."""
        regions = self.plan.reduce
        for k, r in enumerate(regions):
            if simd and k == len(regions) - 1 and self.plan.lane is None:
                self.emit(f"#pragma omp simd{clause}")
            self.open(f"for (int64_t {r.name} = 0; {r.name} < {r.size_name}; ++{r.name})")
        return len(regions)

    def accumulator(self, r: Node) -> tuple[str, str]:
        """(C type, initial value) of a reduce node's accumulator."""
        terms = 1
        for region in self.plan.reduce:
            terms *= region.size
        double = self.o.accumulate == "double" or (self.o.accumulate == "auto" and terms > 16384)
        if r.fn in ("sum", "mean"):
            return ("double", "0.0") if double else ("float", "0.0f")
        if r.fn == "first_index":
            return "int64_t", "reduce_count"       # "not found" sorts after every index
        return "float", "-INFINITY" if r.fn == "max" else "INFINITY"

    def combine(self, r: Node) -> None:
        """The accumulate statement, inside the innermost loop."""
        acc = f"{r.name}_acc" + ("[slot]" if self.lanes else "")
        v = self.value(r.args[0], r, 0)
        if r.fn in ("sum", "mean"):
            self.emit(f"{acc} += {v};")
            return
        if r.fn == "first_index":
            position = self.index(self.plan.reduce)
            self.emit(f"{acc} = ({v} != 0.0f && {position} < {acc}) ? {position} : {acc};")
            return
        if not v.isidentifier():
            self.emit(f"const float {r.name}_in = {v};")      # read once, compared twice
            v = f"{r.name}_in"
        cmp = ">" if r.fn == "max" else "<"
        self.emit(f"{acc} = {v} {cmp} {acc} ? {v} : {acc};")

    def write_pass(self, number: int, reductions: list[Node]) -> None:
        p = self.plan
        kinds = ", ".join(f"{r.fn} ({r.name})" for r in reductions)
        self.emit(f"// pass {number + 1}: {kinds}")
        accs = {r: self.accumulator(r) for r in reductions}
        for r, (ctype, init) in accs.items():
            if self.lanes:
                self.emit(f"{ctype} {r.name}_acc[LANE_BLOCK];")
                self.emit(f"for (int64_t slot = 0; slot < lane_count; ++slot) {r.name}_acc[slot] = {init};")
            else:
                self.emit(f"{ctype} {r.name}_acc = {init};")
        clause = ""
        if not self.lanes:
            groups: dict[str, list[str]] = {}
            for r in reductions:
                op = REDUCTION_OP[r.fn]
                groups.setdefault(op, []).append(f"{r.name}_acc")
            clause = "".join(f" reduction({op}:{', '.join(v)})" for op, v in groups.items())
        depth = self.reduce_loops(clause)
        if self.lanes:
            self.lane_loop()
            depth += 1
        plan = self.park_plan()
        earlier = next((v for v in reversed(plan[:number]) if v is not None), None)
        stop = self.read_parked(earlier)
        self.compute(p.element_values([r.args[0] for r in reductions], stop=stop))
        if plan[number] is not None:
            o = p.full_outputs()[0]
            self.emit(f"{self.out_name[o]}[{self.index(p.output_regions(o))}] = "
                      f"{plan[number].name};  // parked here, read back by the passes after")
        for r in reductions:
            self.combine(r)
        self.bound.pop(earlier, None)
        for _ in range(depth):
            self.close()
        self.finish(reductions)

    def park_plan(self) -> list[Node | None]:
        """Per pass, an expensive value it computes that later passes or the final pass need
        again: it is stored in the output (same index) and read back instead of recomputed
        (a softmax's exp(x - max) once, not twice; a norm's input chain once, not three times).
        The output is written for good only by the final pass."""
        p = self.plan
        outs = p.full_outputs()
        if not self.o.reuse_output or len(outs) != 1 or not p.passes or \
                p.group.scan is not None:
            return [None] * len(p.passes)
        expensive = {"exp", "log", "tanh", "sigmoid", "erf", "gelu", "silu", "mish", "softplus",
                     "elu", "log1p", "expm1", "pow", "sin", "cos"}
        plan, available = [], None
        for k, reductions in enumerate(p.passes):
            stop = frozenset([available]) if available is not None else frozenset()
            here = p.element_values([r.args[0] for r in reductions], stop=stop)
            later = set(p.element_values(
                [r.args[0] for passes in p.passes[k + 1:] for r in passes] + outs, stop=stop))
            found = [m for m in here if m in later and m.fn in expensive]
            plan.append(found[-1] if found else None)
            available = plan[-1] or available
        return plan

    def read_parked(self, node: Node | None) -> frozenset:
        """Read a value an earlier pass parked in the output; what not to recompute."""
        if node is None:
            return frozenset()
        o = self.plan.full_outputs()[0]
        self.emit(f"const float {node.name} = "
                  f"{self.out_name[o]}[{self.index(self.plan.output_regions(o))}];")
        self.bound[node] = node.name
        return frozenset([node])

    def finish(self, reductions: list[Node]) -> None:
        """Turn accumulators into the reduced values (mean divides by the count)."""
        if self.lanes:
            for r in reductions:
                self.emit(f"{ctype(r)} {r.name}[LANE_BLOCK];")
            self.emit("#pragma omp simd")
            self.open("for (int64_t slot = 0; slot < lane_count; ++slot)")
        for r in reductions:
            acc = f"{r.name}_acc" + ("[slot]" if self.lanes else "")
            target = f"{r.name}[slot]" if self.lanes else f"const {ctype(r)} {r.name}"
            if r.fn == "mean":
                divisor = "reduce_count" + (f" - {r.attrs['correction']}"
                                            if r.attrs.get("correction") else "")
                self.emit(f"{target} = (float)({acc} / ({divisor}));")
            else:
                self.emit(f"{target} = ({ctype(r)}){acc};")
            if not self.lanes:
                self.reciprocal(r)
        if self.lanes:
            self.close()

    def write_kept(self, nodes: list[Node]) -> None:
        if not nodes:
            return
        plan = self.plan
        self.emit("// per-row values: " + ", ".join(n.name for n in nodes))
        if self.lanes:
            for n in nodes:
                self.emit(f"float {n.name}[LANE_BLOCK];")
            self.lane_loop()
        operands = [a for n in nodes for a in n.node_args()]
        self.compute([m for m in plan.element_values(operands, kept_scope=True) if m not in nodes])
        self.compute(nodes, assign_kept=True)
        if self.lanes:
            self.close()

    def write_kept_outputs(self) -> None:
        outs = self.plan.kept_outputs()
        if not outs:
            return
        self.emit("// write the reduced outputs")
        if self.lanes:
            self.lane_loop()
        for o in outs:
            index = self.index(self.plan.output_regions(o))
            self.emit(f"{self.out_name[o]}[{index}] = {self.value(o)};")
        if self.lanes:
            self.close()

    def write_final_pass(self) -> None:
        outs = self.plan.full_outputs()
        if not outs:
            return
        scan = self.plan.group.scan
        if scan is not None:
            self.emit(f"// the running sum runs along {self.plan.reduce[0].size_name} in order "
                      "(double accumulator, as torch's cumsum on the CPU)")
            if self.lanes:
                self.emit(f"double {scan.name}_acc[LANE_BLOCK];")
                self.emit(f"for (int64_t slot = 0; slot < lane_count; ++slot) "
                          f"{scan.name}_acc[slot] = 0.0;")
            else:
                self.emit(f"double {scan.name}_acc = 0.0;")
        elif self.plan.passes:
            self.emit("// final pass: compute and write the full-size outputs")
        depth = self.reduce_loops(simd=scan is None)
        if self.plan.lane is not None and (self.plan.rows or self.plan.reduce):
            self.lane_loop()
            depth += 1
        parked = next((v for v in reversed(self.park_plan()) if v is not None), None)
        stop = self.read_parked(parked) if scan is None else frozenset()
        self.compute(self.plan.element_values(outs, stop=stop))
        for o in outs:
            index = self.index(self.plan.output_regions(o))
            self.emit(f"{self.out_name[o]}[{index}] = {self.value(o)};")
        for _ in range(depth):
            self.close()

    def write_global(self) -> None:
        """No kept dims: every pass is one parallel reduction over all elements."""
        p = self.plan
        for number, reductions in enumerate(p.passes):
            kinds = ", ".join(f"{r.fn} ({r.name})" for r in reductions)
            self.emit(f"// pass {number + 1}: {kinds}, split across threads")
            accs = {r: self.accumulator(r) for r in reductions}
            groups: dict[str, list[str]] = {}
            for r, (ctype, init) in accs.items():
                self.emit(f"{ctype} {r.name}_acc = {init};")
                op = REDUCTION_OP[r.fn]
                groups.setdefault(op, []).append(f"{r.name}_acc")
            clause = "".join(f" reduction({op}:{', '.join(v)})" for op, v in groups.items())
            depth = self.global_loops(clause)
            self.compute(p.element_values([r.args[0] for r in reductions]))
            for r in reductions:
                self.combine(r)
            for _ in range(depth):
                self.close()
            self.finish(reductions)
            self.write_kept(p.kept_after[number])
        self.write_kept_outputs()
        if p.full_outputs():
            self.emit("// final pass: compute and write the full-size outputs")
            depth = self.global_loops("")
            self.compute(p.element_values(p.full_outputs()))
            for o in p.full_outputs():
                self.emit(f"{self.out_name[o]}[{self.index(p.output_regions(o))}] = {self.value(o)};")
            for _ in range(depth):
                self.close()

    def global_loops(self, clause: str) -> int:
        regions = self.plan.reduce or self.plan.regions
        for k, r in enumerate(regions):
            innermost = k == len(regions) - 1
            if k == 0:
                self.emit(self.parallel((" simd" if innermost else "") + clause))
            elif innermost:
                self.emit(f"#pragma omp simd{clause}")
            self.open(f"for (int64_t {r.name} = 0; {r.name} < {r.size_name}; ++{r.name})")
        return len(regions)


def cpp_source(kernels: list[str], helpers: set[str], options: CppOptions) -> str:
    """The whole C++ translation unit: includes, helpers in use, the kernels."""
    head = ["#include <algorithm>", "#include <cmath>", "#include <cstdint>", "#include <omp.h>", ""]
    needs_lanes = any("LANE_BLOCK" in k for k in kernels)
    if needs_lanes:
        head += ["// Lanes (consecutive elements of a kept innermost dim) each task owns.",
                 f"constexpr int64_t LANE_BLOCK = {options.lane_block};", ""]
    body = [helpers_source(helpers)] if helpers else []
    return "\n".join(head + body + ["\n\n".join(kernels)]) + "\n"
