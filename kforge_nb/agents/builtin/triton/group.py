"""Triton kernels for one fused group, in the style of Triton's tutorials 02 and 05.

* A group without reductions is one flat kernel: each program owns BLOCK_SIZE consecutive
  output elements (a 1-D grid, the tail masked); operands that broadcast are read at the
  coordinates they vary along.
* A group with reductions works on "rows" (one per kept element). When the reduced elements
  fit in one block (BLOCK_SIZE = next_power_of_2(length) <= MAX_ROW_BLOCK), a program reads a
  tile of ROWS rows ([ROWS, BLOCK_SIZE], ROWS * BLOCK_SIZE about `row_tile` elements, so 2.4M
  rows of 7 are not 2.4M programs) into registers once and every pass works on it there
  (ROW_IN_REGISTERS); otherwise one program per row, each pass looping over it BLOCK_SIZE
  elements at a time, and a final loop writes the outputs. Few long rows are split over many
  programs (split.py). The launcher picks the mode and scales num_warps with the tile.
"""
from __future__ import annotations

import math

from ..candidate import launcher_prologue
from ..capture.ir import Node
from ..capture.partition import Region
from ..elementwise import TritonFormulas
from ..kernel import KernelPlan
from ..op_records import STEPS
from .merged import write_merged

MAX_ROW_BLOCK = 32768             # fp32 elements of one row a program keeps in registers
LANE_ROWS, LANE_STEP = 64, 32     # rows reduced along a middle dim: rows a program, elements a step
AUTOTUNE_CONFIGS = [(256, 2), (1024, 4), (4096, 8)]      # flat kernels: (BLOCK_SIZE, num_warps)
AUTOTUNE_WARPS = [4, 8, 16]                              # row kernels: num_warps only


def distinct(names: list[str]) -> list[str]:
    """The names, a numeric suffix added to any that repeats an earlier one."""
    seen, out = set(), []
    for n in names:
        name, k = n, 2
        while name in seen:
            name, k = f"{n}_{k}", k + 1
        seen.add(name)
        out.append(name)
    return out


def row_warps(block) -> str | int:
    """num_warps for a row program of `block` elements: 4 up to 2048, 8 up to 8192, then 16.
    An int gives the number; an expression (the launcher's) gives the expression."""
    if isinstance(block, int):
        return 4 if block <= 2048 else (8 if block <= 8192 else 16)
    return f"4 if {block} <= 2048 else (8 if {block} <= 8192 else 16)"


def no_fused_multiply_add(kp: KernelPlan) -> str:
    """The launch option of a kernel that rounds (round, floor, a comparison): torch rounds
    each product before the next op reads it, where a GPU's fused multiply-add would not, and
    one bit decides a whole step there. Triton fuses by default."""
    return ", enable_fp_fusion=False" if any(m.fn in STEPS for m in kp.group.members) else ""


def stages(options) -> str:
    """A row launch's num_stages argument, where the options name one (a flat kernel has no
    loop to pipeline)."""
    return f", num_stages={options.num_stages}" if options.num_stages else ""


def launch_at_capture(kp: KernelPlan, options, split: bool) -> tuple:
    """What this kernel's launcher passes on a GPU at the captured sizes (the programs' shape,
    warps, stages): two candidates with the same kernels and these the same run the same,
    however their launchers' text differs (a launcher handles every size)."""
    o = options
    tuned = o.autotune                 # the autotuner picks warps (and flat blocks) on a GPU
    if not kp.reduce:
        return ("flat", None if tuned else (o.block_size, o.num_warps))
    row_block = 1 << max(0, (math.prod(r.size for r in kp.reduce) - 1).bit_length())
    # few long rows may be split over programs, where the GPU is large enough for it to pay
    long = (o.block_size, o.num_warps) if split and row_block > MAX_ROW_BLOCK else ()
    if kp.lane is not None:            # neighbouring rows a program, a few elements a step
        block, tile_rows, looped = min(LANE_STEP, row_block), LANE_ROWS, True
    elif row_block > MAX_ROW_BLOCK:    # one program a row, looping over it
        block, tile_rows, looped = o.block_size, 1, True
    else:                              # rows in registers
        block, tile_rows, looped = row_block, max(1, o.row_tile // row_block), False
    warps = None if tuned else (o.row_warps or row_warps(block * tile_rows))
    return ("rows", block, tile_rows, warps, o.num_stages if looped and not tuned else 0, long)


class TritonGroupKernel:
    """One @triton.jit kernel for a fused group; `launcher()` writes its Python wrapper."""

    def __init__(self, plan: KernelPlan, options):
        self.plan, self.o = plan, options
        self.f = TritonFormulas()
        self.lines: list[str] = []
        self.depth = 1
        self.loaded: dict = {}
        self.done: set = set()        # members already computed in the current scope
        self.flat = ""
        self.rows2d = False           # the register path: a [ROWS, BLOCK_SIZE] tile of rows
        out_names = ["out_ptr"] if len(plan.outputs) == 1 else \
            [f"{o.name}_out_ptr" for o in plan.outputs]
        names = distinct([f"{n.name}_ptr" for n in plan.inputs] + out_names)
        self.ptr = dict(zip(plan.inputs, names))
        self.out_ptr = dict(zip(plan.outputs, names[len(plan.inputs):]))

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
            if not regions:      # a 0-d operand (a scalar parameter): one scalar, no mask
                # (a block mask on a scalar pointer is a compile error)
                read = f"tl.load({self.ptr[node]})"
            elif self.flat or any(r.reduced for r in regions):
                read = f"tl.load({self.ptr[node]} + {index}, mask={mask}, other=0.0)"
            elif self.rows2d:    # one value per row of the tile
                read = f"tl.load({self.ptr[node]} + {index}, mask=row_ok, other=0.0)"
            else:    # varies only with this program's kept coordinates: one scalar
                read = f"tl.load({self.ptr[node]} + {index})"
            self.emit(f"{name} = {self.f.loaded(node.dtype, read)}")   # bf16 / fp16: as float32
            self.loaded[key] = name
        return self.loaded[key]

    def value(self, node, user: Node | None = None, k: int = 0, mask: str = "mask") -> str:
        if not isinstance(node, Node):
            return self.f.lit(node)
        src = self.plan.source(node)
        if src in self.plan.group.member_set or not src.is_tensor:
            return src.name
        return self.load(src, user, k, mask)

    def stored(self, output: Node) -> str:
        """An output's value as its pointer stores it (a bf16 value by its bits)."""
        return self.f.stored(output.dtype, self.value(output), self.out_ptr[output])

    def compute(self, nodes: list[Node], mask: str = "mask") -> None:
        for m in nodes:
            if m in self.done:
                continue
            self.done.add(m)
            if m.op == "scan":
                self.scan(m, mask)
                continue
            args = [self.value(a, m, k, mask) for k, a in enumerate(m.args)]
            attrs = dict(m.attrs)
            if m.fn == "pow" and isinstance(m.args[1], (int, float)):
                attrs["exponent_value"] = m.args[1]
            # a bf16 / fp16 op rounded as torch's (stores to its pointer then convert exactly)
            self.emit(f"{m.name} = {self.f.rounded(m.dtype, self.f.formula(m.fn, args, attrs))}")

    def scan(self, m: Node, mask: str) -> None:
        """A running sum or product over this block, carried on from the blocks before it;
        in float64, as torch's cumsum and cumprod accumulate on the CPU."""
        v, axis = self.value(m.args[0], m, 0, mask), 1 if self.rows2d else 0
        if m.fn == "sum":
            self.emit(f"{m.name}_terms = tl.where({mask}, {v}, 0.0).to(tl.float64)")
            # an exclusive scan leaves the element itself out
            own = f" - {m.name}_terms" if m.attrs.get("exclusive") else ""
            self.emit(f"{m.name} = (tl.cumsum({m.name}_terms, axis={axis}){own} + "
                      f"{m.name}_carry).to(tl.float32)")
            self.emit(f"{m.name}_carry += {self.reduce_call('sum', m.name + '_terms')}")
            return
        self.emit(f"{m.name}_terms = tl.where({mask}, {v}, 1.0).to(tl.float64)")
        self.emit(f"{m.name}_run = tl.cumprod({m.name}_terms, axis={axis}) * {m.name}_carry")
        self.emit(f"{m.name} = {m.name}_run.to(tl.float32)")
        last = "tl.arange(0, BLOCK_SIZE)" + ("[None, :]" if self.rows2d else "")
        # the block's last lane holds the product so far (masked lanes multiply by 1)
        self.emit(f"{m.name}_carry = " + self.reduce_call(
            "sum", f"tl.where({last} == BLOCK_SIZE - 1, {m.name}_run, 0.0)"))

    # -- kernels -------------------------------------------------------------------------------
    def params(self) -> list[str]:
        p = self.plan
        extra = ["ROW_IN_REGISTERS: tl.constexpr", "ROWS: tl.constexpr"] if p.reduce else []
        return [self.ptr[n] for n in p.inputs] + [self.out_ptr[o] for o in p.outputs] + \
            [s.name for s in p.scalars] + [r.size_name for r in p.regions] + \
            ["BLOCK_SIZE: tl.constexpr"] + extra

    def write(self) -> str:
        p = self.plan
        head = ["@triton.jit", f"def {p.name}({', '.join(self.params())}):"]
        head += [f"    # {line}" for line in p.story()]
        if not p.reduce:
            self.write_flat()
        else:
            self.write_rows()
        tail = []
        if self.o.autotune:
            if p.reduce:
                configs = ", ".join(f"triton.Config({{}}, num_warps={w})" for w in AUTOTUNE_WARPS)
            else:
                configs = ",\n        ".join(f"triton.Config({{'BLOCK_SIZE': {b}}}, "
                                             f"num_warps={w})" for b, w in AUTOTUNE_CONFIGS)
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
            self.emit(f"tl.store({self.out_ptr[o]} + offsets, {self.stored(o)}, mask=mask)")

    def write_rows(self) -> None:
        p = self.plan
        kept = [r for r in p.regions if not r.reduced]
        kept_total = " * ".join(r.size_name for r in kept) or "1"
        self.emit("# a tile of ROWS rows (consecutive kept elements) per program")
        self.emit("program = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]")
        self.emit(f"row_ok = program < {kept_total}")
        if kept:
            self.coordinates(kept, "program")
        self.emit(f"reduce_count = {' * '.join(r.size_name for r in p.reduce)}")
        self.rows2d = True
        self.emit("if ROW_IN_REGISTERS:")
        self.depth += 1
        self.emit("# the rows fit in one block: each read once into registers")
        self.write_passes(looped=False)
        self.depth -= 1
        self.emit("else:")
        self.depth += 1
        self.emit("# long (or strided) rows: every pass loops over them BLOCK_SIZE elements at "
                  "a time")
        self.write_passes(looped=True)
        self.depth -= 1
        self.rows2d = False

    def reduce_call(self, fn: str, acc: str) -> str:
        """Reduce a block (or a tile's rows, keeping a [ROWS, 1] shape) with tl.<fn>."""
        if self.rows2d:
            return f"tl.{fn}({acc}, axis=1)[:, None]"
        return f"tl.{fn}({acc}, axis=0)"

    def write_passes(self, looped: bool) -> None:
        p = self.plan
        self.loaded, self.done = {}, set()
        if not looped:
            self.block_indices("0")
        skip = -1
        for number, reductions in enumerate(p.passes):
            if number == skip:
                continue
            if looped and write_merged(self, number):   # this pass and the next in one read
                skip = number + 1
                continue
            self.emit(f"# pass {number + 1}: " + ", ".join(f"{r.fn} ({r.name})"
                                                          for r in reductions))
            values = p.element_values([r.args[0] for r in reductions])
            if looped:
                for r in reductions:
                    init = {"sum": "0.0", "mean": "0.0", "max": 'float("-inf")',
                            "min": 'float("inf")', "first_index": "2**62"}[r.fn]
                    dtype = "tl.int64" if r.fn == "first_index" else "tl.float32"
                    shape = "[ROWS, BLOCK_SIZE]" if self.rows2d else "[BLOCK_SIZE]"
                    self.emit(f"{r.name}_acc = tl.full({shape}, {init}, {dtype})")
                self.open_reduce_loop()
                self.compute(values, mask="in_range")
                for r in reductions:
                    self.combine(r)
                self.close_reduce_loop()
                for r in reductions:
                    self.finish(r, f"{r.name}_acc")
            else:
                self.compute(values, mask="in_range")
                for r in reductions:
                    self.finish(r, self.masked(r))
            self.compute_kept_after(number)
        for o in p.kept_outputs():
            mask = ", mask=row_ok" if self.rows2d else ""
            self.emit(f"tl.store({self.out_ptr[o]} + program, {self.stored(o)}{mask})")
        if p.full_outputs():
            self.emit("# write the full-size outputs")
            if p.group.scan is not None:
                shape = "[ROWS, 1]" if self.rows2d else "[]"
                start = "1.0" if p.group.scan.fn == "prod" else "0.0"
                self.emit(f"{p.group.scan.name}_carry = tl.full({shape}, {start}, tl.float64)")
            if looped:
                self.open_reduce_loop()
            self.store_full_outputs()
            if looped:
                self.close_reduce_loop()

    def store_full_outputs(self) -> None:
        """Compute the full-size outputs over the current block and store them."""
        p = self.plan
        self.compute(p.element_values(p.full_outputs()), mask="in_range")
        index = self.horner(p.regions)
        for o in p.full_outputs():
            self.emit(f"tl.store({self.out_ptr[o]} + {index}, {self.stored(o)}, mask=in_range)")

    def compute_kept_after(self, number: int) -> None:
        """The per-row values that follow from pass `number`'s reductions (rstd from var)."""
        p = self.plan
        self.switch_scope()
        after = p.kept_after[number]
        self.compute([m for m in p.element_values(
            [a for n in after for a in n.node_args()], kept_scope=True) if m not in after],
            mask="True")
        self.compute(after, mask="True")
        self.switch_scope()

    def block_indices(self, start: str) -> None:
        total = " * ".join(r.size_name for r in self.plan.reduce)
        if self.rows2d:
            self.emit(f"r = {start} + tl.arange(0, BLOCK_SIZE)[None, :]" if start != "0" else
                      "r = tl.arange(0, BLOCK_SIZE)[None, :]")
            self.emit(f"in_range = (r < {total}) & row_ok")
        else:
            self.emit(f"r = {start} + tl.arange(0, BLOCK_SIZE)" if start != "0" else
                      "r = tl.arange(0, BLOCK_SIZE)")
            self.emit(f"in_range = r < {total}")
        self.coordinates(self.plan.reduce, "r")
        scan = self.plan.group.scan
        if scan is not None and scan.attrs.get("reverse"):    # walked from the last element
            r = self.plan.reduce[0]
            self.emit(f"{r.name} = {r.size_name} - 1 - {r.name}")

    def open_reduce_loop(self) -> None:
        total = " * ".join(r.size_name for r in self.plan.reduce)
        self.loaded, self.done = {}, {m for m in self.done if self.plan.space(m) == "kept"}
        self.emit(f"for start in range(0, {total}, BLOCK_SIZE):")
        self.depth += 1
        self.block_indices("start")

    def close_reduce_loop(self) -> None:
        self.depth -= 1
        self.loaded, self.done = {}, {m for m in self.done if self.plan.space(m) == "kept"}

    def switch_scope(self) -> None:
        """Between per-element and per-row code: values of external operands only ("free")
        are recomputed in the new scope, as a vector or as one number per row."""
        self.done = {m for m in self.done if self.plan.space(m) != "free"}

    def masked(self, r: Node) -> str:
        """The reduction's input over this block, the lanes past the row's end neutral."""
        v = self.value(r.args[0], r, 0, "in_range")
        if r.fn in ("sum", "mean"):
            return f"tl.where(in_range, {v}, 0.0)"
        if r.fn == "first_index":    # the first index where x hits the max
            return f"tl.where(in_range & ({v} != 0.0), r.to(tl.int64), 2**62)"
        other = 'float("-inf")' if r.fn == "max" else 'float("inf")'
        return f"tl.where(in_range, {v}, {other})"

    def combine(self, r: Node) -> None:
        acc = f"{r.name}_acc"
        if r.fn in ("sum", "mean"):
            self.emit(f"{acc} += {self.masked(r)}")
        else:
            fn = {"max": "maximum", "min": "minimum", "first_index": "minimum"}[r.fn]
            self.emit(f"{acc} = tl.{fn}({acc}, {self.masked(r)})")

    def finish(self, r: Node, acc: str) -> None:
        self.done.add(r)
        if r.fn == "mean":
            correction = r.attrs.get("correction") or 0
            divisor = f"(reduce_count - {correction})" if correction else "reduce_count"
            self.emit(f"{r.name} = {self.reduce_call('sum', acc)} / {divisor}")
        elif r.fn == "first_index":
            self.emit(f"{r.name} = {self.reduce_call('min', acc)}")
        else:
            self.emit(f"{r.name} = {self.reduce_call(r.fn, acc)}")

    # -- the Python wrapper ----------------------------------------------------------------------
    def launcher(self, name: str, split=None) -> list[str]:
        """The Python wrapper; `split` (TritonSplitKernels) adds the branch for few long rows."""
        kp, o = self.plan, self.o
        fusion = no_fused_multiply_add(kp)
        lines = launcher_prologue(kp, name, "Launches")
        names = [r.size_name for r in kp.regions]
        call = [n.name for n in kp.inputs] + [x.name for x in kp.outputs] + \
            [s.name for s in kp.scalars] + names
        if kp.reduce:
            kept = " * ".join(r.size_name for r in kp.regions if not r.reduced) or "1"
            reduced = " * ".join(r.size_name for r in kp.reduce)
            if split is not None:
                device = kp.inputs[0].name + ".device" if kp.inputs else "torch.device('cpu')"
                lines += split.launch_lines([n.name for n in kp.inputs],
                                            [x.name for x in kp.outputs],
                                            [s.name for s in kp.scalars], names,
                                            f"({kept})", f"({reduced})", device)
            lines += [f"    # rows in registers when they fit in {MAX_ROW_BLOCK} elements, short ones "
                      f"{o.row_tile} elements' worth to a program; a long row loops",
                      f"    row_block = triton.next_power_of_2({reduced})",
                      f"    in_registers = row_block <= {MAX_ROW_BLOCK}",
                      f"    block = row_block if in_registers else {o.block_size}",
                      f"    tile_rows = max(1, {o.row_tile} // row_block) if in_registers else 1"]
            if all(r.reduced for r in kp.regions):    # one row only: a tile of one
                lines += ["    tile_rows = 1"]
            if kp.lane is not None:
                # the reduced dims are not innermost: a row's elements are far apart, so a
                # program takes LANE_ROWS neighbouring rows (coalesced loads) and loops over them
                lines += [f"    in_registers, block, tile_rows = False, "
                          f"min({LANE_STEP}, row_block), {LANE_ROWS}"]
            lines += [f"    grid = (triton.cdiv({kept}, tile_rows),)"]
            fixed = "BLOCK_SIZE=block, ROW_IN_REGISTERS=in_registers, ROWS=tile_rows"
            if o.autotune:
                lines.append(f"    tuning = {{}} if torch.cuda.is_available() else "
                             f"{{'num_warps': {o.num_warps}}}")
                lines.append(f"    {kp.name}[grid]({', '.join(call)}, {fixed}{fusion}, **tuning)")
            else:
                warps = o.row_warps or row_warps("block * tile_rows")
                lines.append(f"    {kp.name}[grid]({', '.join(call)}, {fixed}, "
                             f"num_warps={warps}{stages(o)}{fusion})")
        else:
            total = " * ".join(names)
            lines.append(f"    grid = lambda meta: (triton.cdiv({total}, meta['BLOCK_SIZE']),)")
            if o.autotune:
                lines.append(f"    tuning = {{}} if torch.cuda.is_available() else "
                             f"{{'BLOCK_SIZE': {o.block_size}, 'num_warps': {o.num_warps}}}")
                lines.append(f"    {kp.name}[grid]({', '.join(call)}{fusion}, **tuning)")
            else:
                lines.append(f"    {kp.name}[grid]({', '.join(call)}, "
                             f"BLOCK_SIZE={o.block_size}, num_warps={o.num_warps}{fusion})")
        lines.append(f"    return {', '.join(x.name for x in kp.outputs)}")
        return lines
