"""Split reductions: a few long rows spread over many programs.

One program per row leaves a GPU idle when there are fewer rows than streaming multiprocessors
(LayerNorm over 16 rows of 4M elements ran 16 programs: 4 % of the speed of light). Here each
row is cut into SPLITS chunks of CHUNK elements, one program per (row, chunk), and the row's
passes run as a chain of kernels:

* `NAME_pass1 .. NAME_passP`: each program combines the row's partial results of the earlier
  passes (SPLITS numbers each, read as one vector), computes the per-row values that follow
  from them, then reduces its own chunk for this pass and stores one partial per reduction
  (a sum for sum and mean, a max, a min, a first index);
* `NAME_final`: combines every pass the same way and writes the outputs of its chunk (the
  per-row outputs once, by chunk 0).

Every pass's result is complete before the next pass uses it, so this is exact for any chain
of passes (softmax's max then sum, a norm's mean then variance) at the cost of reading the row
once per pass. Rows with a running sum (cumsum) keep one program per row.
"""
from __future__ import annotations

from ..capture.ir import Node
from .group import MAX_ROW_BLOCK, TritonGroupKernel, no_fused_multiply_add

NEUTRAL = {"sum": "0.0", "mean": "0.0", "max": 'float("-inf")', "min": 'float("inf")',
           "first_index": "2**62"}
# rows that fit in one program's registers are read once there: not split
SPLIT_ROW_MIN = MAX_ROW_BLOCK


def can_split(plan) -> bool:
    return bool(plan.reduce) and plan.group.scan is None and bool(plan.passes)


class TritonSplitKernels(TritonGroupKernel):
    """The P + 1 kernels of a split row reduction, and the launcher lines that chain them."""

    def partial(self, r: Node) -> str:
        return f"{r.name}_part_ptr"

    def split_params(self, upto: int, writes: int | None) -> list[str]:
        p = self.plan
        reads = [self.partial(r) for passes in p.passes[:upto] for r in passes]
        own = [f"{r.name}_out_ptr" for r in p.passes[writes]] if writes is not None else []
        outs = [self.out_ptr[o] for o in p.outputs] if writes is None else []
        return [self.ptr[n] for n in p.inputs] + outs + reads + own + \
            [s.name for s in p.scalars] + [r.size_name for r in p.regions] + \
            ["CHUNK", "SPLITS", "BLOCK_SIZE: tl.constexpr", "PARTS: tl.constexpr"]

    def kernels(self) -> list[str]:
        p, out = self.plan, []
        for number in range(len(p.passes) + 1):
            self.lines, self.depth, self.loaded, self.done = [], 1, {}, set()
            final = number == len(p.passes)
            name = f"{p.name}_final" if final else f"{p.name}_pass{number + 1}"
            head = ["@triton.jit", f"def {name}("
                    f"{', '.join(self.split_params(number, None if final else number))}):"]
            what = "write the outputs of one chunk" if final else \
                f"partial results of pass {number + 1} over one chunk"
            head.append(f"    # split row reduction, kernel {number + 1} of "
                        f"{len(p.passes) + 1}: {what}")
            self.write_split(number)
            out.append("\n".join(head + self.lines))
        return out

    def write_split(self, number: int) -> None:
        p = self.plan
        kept = [r for r in p.regions if not r.reduced]
        self.emit("program = tl.program_id(0)      # the row")
        self.emit("split = tl.program_id(1)        # the chunk of it")
        if kept:
            self.coordinates(kept, "program")
        self.emit(f"reduce_count = {' * '.join(r.size_name for r in p.reduce)}")
        self.emit("chunk_start = split * CHUNK")
        for earlier in range(number):
            self.emit(f"# pass {earlier + 1} of the whole row, from the partials of its chunks")
            self.emit("parts = tl.arange(0, PARTS)")
            for r in p.passes[earlier]:
                dtype = ".to(tl.int64)" if r.fn == "first_index" else ""
                self.emit(f"{r.name}_parts = tl.load({self.partial(r)} + program * SPLITS + "
                          f"parts, mask=parts < SPLITS, other={NEUTRAL[r.fn]}){dtype}")
                self.finish(r, f"{r.name}_parts")
            self.compute_kept_after(earlier)
        if number < len(p.passes):
            reductions = p.passes[number]
            self.emit(f"# pass {number + 1} over this chunk: " +
                      ", ".join(f"{r.fn} ({r.name})" for r in reductions))
            for r in reductions:
                dtype = "tl.int64" if r.fn == "first_index" else "tl.float32"
                self.emit(f"{r.name}_acc = tl.full([BLOCK_SIZE], {NEUTRAL[r.fn]}, {dtype})")
            self.open_reduce_loop()
            self.compute(p.element_values([r.args[0] for r in reductions]), mask="in_range")
            for r in reductions:
                self.combine(r)
            self.close_reduce_loop()
            for r in reductions:
                fn = {"sum": "sum", "mean": "sum", "max": "max", "min": "min",
                      "first_index": "min"}[r.fn]
                self.emit(f"tl.store({r.name}_out_ptr + program * SPLITS + split, "
                          f"tl.{fn}({r.name}_acc, axis=0))")
            return
        if p.kept_outputs():
            self.emit("if split == 0:")
            self.depth += 1
            for o in p.kept_outputs():
                self.emit(f"tl.store({self.out_ptr[o]} + program, {self.stored(o)})")
            self.depth -= 1
        if p.full_outputs():
            self.emit("# write this chunk's full-size outputs")
            self.open_reduce_loop()
            self.store_full_outputs()
            self.close_reduce_loop()

    # the loops of the parent walk one chunk instead of the whole row
    def open_reduce_loop(self) -> None:
        self.loaded, self.done = {}, {m for m in self.done if self.plan.space(m) == "kept"}
        self.emit("for start in range(chunk_start, chunk_start + CHUNK, BLOCK_SIZE):")
        self.depth += 1
        self.emit("r = start + tl.arange(0, BLOCK_SIZE)")
        self.emit("in_range = r < reduce_count")
        self.coordinates(self.plan.reduce, "r")

    def launch_lines(self, call_inputs: list[str], outputs: list[str], scalars: list[str],
                     sizes: list[str], kept: str, reduced: str, device: str) -> list[str]:
        """The launcher's branch for few long rows (indented for inside the launcher)."""
        p = self.plan
        programs = (f"4 * (torch.cuda.get_device_properties({device}).multi_processor_count "
                    f"if {device}.type == 'cuda' else 4)")
        lines = [f"    if {reduced} > {SPLIT_ROW_MIN} and {kept} < {programs}:",
                 "        # few long rows: each row split over several programs, pass by pass",
                 f"        block = {self.o.block_size}",
                 f"        splits = min(triton.cdiv({reduced}, 4 * block), "
                 f"triton.cdiv({programs}, {kept}))",
                 f"        chunk = triton.cdiv(triton.cdiv({reduced}, splits), block) * block",
                 f"        splits = triton.cdiv({reduced}, chunk)",
                 "        parts = triton.next_power_of_2(splits)",
                 f"        grid = ({kept}, splits)"]
        for passes in p.passes:
            for r in passes:
                dtype = "torch.int64" if r.fn == "first_index" else "torch.float32"
                lines.append(f"        {r.name}_part = torch.empty(({kept}) * splits, "
                             f"dtype={dtype}, device={device})")
        tail = ["chunk", "splits", "BLOCK_SIZE=block", "PARTS=parts",
                "num_warps=" + str(self.o.num_warps) + no_fused_multiply_add(p)]
        for number in range(len(p.passes) + 1):
            final = number == len(p.passes)
            reads = [f"{r.name}_part" for passes in p.passes[:number] for r in passes]
            own = [] if final else [f"{r.name}_part" for r in p.passes[number]]
            args = call_inputs + (outputs if final else []) + reads + own + scalars + sizes + \
                tail
            name = f"{p.name}_final" if final else f"{p.name}_pass{number + 1}"
            lines.append(f"        {name}[grid]({', '.join(args)})")
        lines.append(f"        return {', '.join(outputs)}")
        return lines
