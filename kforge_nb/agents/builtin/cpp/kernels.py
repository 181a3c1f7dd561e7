"""C++ (OpenMP) kernels for the `cpp` target, one `extern "C"` function per fused group.

Shape of every kernel: the kept ("row") dims are split across threads with
`#pragma omp parallel for`; inside a task, each pass walks the reduced dims with the innermost
loop under `#pragma omp simd`. When the innermost dim is not reduced (RMS norm over channels of
an NCHW tensor), it becomes a block of *lanes*: each task owns LANE_BLOCK consecutive lanes and
keeps one accumulator per lane, so the simd loop still runs over contiguous memory. A reduction
over everything (a Frobenius norm) parallelises the reduction loop itself. The loops and passes
are written by the `Passes` mixin (passes.py); this module holds the writer's
state, how one value is written, and the translation unit around the kernels.
"""
from __future__ import annotations

from ..candidate import CodeFacts
from ..capture.ir import Node
from ..elementwise import CppFormulas, StdFormulas
from ..kernel import KernelPlan
from .knobs import CppOptions
from .maths import FUNCTIONS, helpers_source
from .passes import Passes, ctype


class CppKernel(Passes):
    """One extern "C" function for a fused group: the writer's state and how a value is
    written; the loops and passes are in passes.py."""

    def __init__(self, plan: KernelPlan, options: CppOptions):
        plan = plan.rows_as_lanes() if options.rows_as_lanes else plan
        self.plan, self.o = plan, options
        self.f = CppFormulas(FUNCTIONS) if options.vector_math else StdFormulas()
        self.lines: list[str] = []
        self.depth = 0
        self.lanes = plan.lane is not None and bool(plan.reduce)   # blocks of lanes, per task
        self.out_name = {o: ("out" if len(plan.outputs) == 1 else f"{o.name}_out")
                         for o in plan.outputs}
        self.bound: dict = {}       # external nodes already held in a variable (a GEMM tile)
        self.hoisted: set = set()   # free values already computed for the whole row
        self.inverted: set = set()
        # what the text holds, noted as it is written (the passes and pragmas below)
        self.facts = CodeFacts(lane_block=self.lanes)

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
        return self.f.loaded(node.dtype,
                             f"{node.name}[{self.index(self.plan.index_regions(pattern))}]")

    def store(self, output: Node, index: str, value: str) -> str:
        """The statement that writes `value` (float, rounded to the output's dtype already)."""
        return f"{self.out_name[output]}[{index}] = {self.f.stored(output.dtype, value)};"

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
        """Per-row values that elements are divided by: divide once, multiply per element
        (not where a rounding follows: there the quotient must be torch's to the last bit)."""
        p = self.plan
        if self.lanes:
            return set()
        return {p.source(m.args[1]) for m in p.group.members
                if m.fn == "div" and isinstance(m.args[1], Node) and p.space(m) == "full"
                and p.space(p.source(m.args[1])) == "kept" and not m.attrs.get("exact")}

    def reciprocal(self, node: Node) -> None:
        if node in self.inverted:
            self.emit(f"const float {node.name}_inv = 1.0f / {node.name};")

    def formula(self, m: Node) -> str:
        if m.fn == "div" and isinstance(m.args[1], Node) and not m.attrs.get("exact") and \
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
        return self.f.rounded(m.dtype, expr)      # a bf16 / fp16 op: rounded as torch's

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
                if m.attrs.get("exclusive"):          # the sum before this element
                    self.emit(f"const float {m.name} = (float){acc};")
                step = "*=" if m.fn == "prod" else "+="
                self.emit(f"{acc} {step} {self.value(m.args[0], m, 0)};")
                if not m.attrs.get("exclusive"):
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
        params = [f"const {ctype(n)}* {n.name}" for n in p.inputs]
        params += [f"{ctype(o)}* {self.out_name[o]}" for o in p.outputs]
        params += [f"float {s.name}" for s in p.scalars]
        params += [f"int64_t {r.size_name}" for r in p.regions]
        return f'extern "C" void {p.name}({", ".join(params)})'

    def write(self) -> str:
        p = self.plan
        self.inverted = self.divisors()
        self.parks = self.park_plan()      # per pass: the value it parks (passes.py)
        for line in p.story():
            self.emit(f"// {line}")
        self.open(self.signature())
        total = " * ".join(r.size_name for r in p.regions)
        self.emit(f"const int64_t elements = {total};")
        if any(r.fn in ("mean", "first_index") for s in p.passes for r in s):
            count = " * ".join(r.size_name for r in p.reduce)
            self.emit(f"const int64_t reduce_count = {count};  // elements per reduction")
        if not p.rows and not p.lane and p.group.scan is None:   # a scan stays one task
            self.write_global()
        else:
            self.write_tasks()
        self.close()
        return "\n".join(self.lines)

    def parallel(self, extra: str = "") -> str:
        # dynamic scheduling hands out whole rows; a flat element loop stays static
        schedule = self.o.schedule if not extra else "static"
        self.facts.openmp = True
        pragma = f"#pragma omp parallel for{extra} schedule({schedule})"
        if not self.o.min_parallel_work:
            return pragma
        if "simd" in extra:
            # with `simd`, GCC compiles an if(...) clause's serial fallback unvectorised; a
            # team of one keeps the single, vectorised version
            return (f"{pragma} num_threads(elements >= {self.o.min_parallel_work} ? "
                    "omp_get_max_threads() : 1)")
        return f"{pragma} if(elements >= {self.o.min_parallel_work})"


def cpp_source(kernels: list[str], helpers: set[str], options: CppOptions,
               lanes: bool) -> str:
    """The whole C++ translation unit: includes, helpers in use, `LANE_BLOCK` where a kernel
    walks blocks of lanes, the kernels."""
    head = []
    if options.vector_width == 512:
        # GCC tunes recent Intel cores for 256-bit vectors even where AVX-512 exists (the
        # clock drops under wide vectors); maths-heavy loops can still gain from 512. The
        # guard keeps the file valid for a compiler or CPU without AVX-512.
        head += ["#if defined(__GNUC__) && defined(__AVX512F__)",
                 '#pragma GCC target("prefer-vector-width=512")', "#endif"]
    head += ["#include <algorithm>", "#include <cmath>", "#include <cstdint>", "#include <omp.h>",
             ""]
    if lanes:
        head += ["// Lanes (consecutive elements of a kept innermost dim) each task owns.",
                 f"constexpr int64_t LANE_BLOCK = {options.lane_block};", ""]
    body = [helpers_source(helpers)] if helpers else []
    return "\n".join(head + body + ["\n\n".join(kernels)]) + "\n"
