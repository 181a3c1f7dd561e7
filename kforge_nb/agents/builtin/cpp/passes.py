"""The passes of a C++ kernel: how a CppKernel walks its rows, reductions and outputs.

A mixin of CppKernel (kernels.py), which holds the writer's state and how one value is
written; here is the loop structure: threads over rows (and blocks of lanes) with the passes
inside each task, one flat loop for a group without reductions, or parallel reductions over
everything when no dim is kept. A pass may park an expensive value in the output for the
passes after it.
"""
from __future__ import annotations

import torch

from ..capture.ir import Node
from ..op_records import expensive

REDUCTION_OP = {"sum": "+", "mean": "+", "max": "max", "min": "min", "first_index": "min"}


def ctype(node: Node) -> str:
    """The C type a kernel's pointer to `node` points at (bf16 / fp16: their 16 bits)."""
    return {torch.int64: "int64_t", torch.bool: "bool", torch.bfloat16: "uint16_t",
            torch.float16: "uint16_t"}.get(node.dtype, "float")


def pointer(node: Node, name: str | None = None) -> str:
    """A tensor (`name`, else the node's own) as the kernel's pointer takes it: bf16 / fp16 as
    their bits (uint16_t)."""
    name = name or node.name
    return f"{name}.view(torch.uint16)" if ctype(node) == "uint16_t" else name


class Passes:
    """write_tasks / write_flat / write_global and the passes they are made of."""

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
        self.facts.task_loop = True
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
        self.facts.openmp = True
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
            scan = self.plan.group.scan
            if scan is not None and scan.attrs.get("reverse"):     # from the last element
                self.open(f"for (int64_t {r.name} = {r.size_name} - 1; {r.name} >= 0; "
                          f"--{r.name})")
            else:
                self.open(f"for (int64_t {r.name} = 0; {r.name} < {r.size_name}; ++{r.name})")
        return len(regions)

    def accumulator(self, r: Node) -> tuple[str, str]:
        """(C type, initial value) of a reduce node's accumulator."""
        terms = 1
        for region in self.plan.reduce:
            terms *= region.size
        double = self.o.accumulate == "double" or (self.o.accumulate == "auto" and terms > 16384)
        if r.fn in ("sum", "mean"):
            self.facts.double_accumulator |= double     # (asked only for one a pass declares)
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
        plan = self.parks
        earlier = next((v for v in reversed(plan[:number]) if v is not None), None)
        stop = self.read_parked(earlier)
        self.compute(p.element_values([r.args[0] for r in reductions], stop=stop))
        if plan[number] is not None:
            o = p.full_outputs()[0]
            self.emit(f"{self.out_name[o]}[{self.index(p.output_regions(o))}] = "
                      f"{plan[number].name};  // parked here, read back by the passes after")
            self.facts.parked_output = True
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
        # (a bf16 / fp16 output would round what it holds: nothing is parked there)
        if not self.o.reuse_output or len(outs) != 1 or not p.passes or \
                p.group.scan is not None or outs[0].dtype != torch.float32:
            return [None] * len(p.passes)
        plan, available = [], None
        for k, reductions in enumerate(p.passes):
            stop = frozenset([available]) if available is not None else frozenset()
            here = p.element_values([r.args[0] for r in reductions], stop=stop)
            later = set(p.element_values(
                [r.args[0] for passes in p.passes[k + 1:] for r in passes] + outs, stop=stop))
            found = [m for m in here if m in later and expensive(m.fn)]
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
            self.emit(self.store(o, index, self.value(o)))
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
            start = "1.0" if scan.fn == "prod" else "0.0"
            self.facts.double_accumulator = True
            if self.lanes:
                self.emit(f"double {scan.name}_acc[LANE_BLOCK];")
                self.emit(f"for (int64_t slot = 0; slot < lane_count; ++slot) "
                          f"{scan.name}_acc[slot] = {start};")
            else:
                self.emit(f"double {scan.name}_acc = {start};")
        elif self.plan.passes:
            self.emit("// final pass: compute and write the full-size outputs")
        depth = self.reduce_loops(simd=scan is None)
        if self.plan.lane is not None and (self.plan.rows or self.plan.reduce):
            self.lane_loop()
            depth += 1
        parked = next((v for v in reversed(self.parks) if v is not None), None)
        stop = self.read_parked(parked) if scan is None else frozenset()
        self.compute(self.plan.element_values(outs, stop=stop))
        for o in outs:
            index = self.index(self.plan.output_regions(o))
            self.emit(self.store(o, index, self.value(o)))
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
                self.emit(self.store(o, self.index(p.output_regions(o)), self.value(o)))
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
