"""BuiltinGenerator: the generation role without a model.

Every candidate it writes starts with a `# kforge-builtin: {...}` line recording the target and
the knobs it was written with. An "optimise" request starts from the previous candidate's knobs
and applies the recommendation's action (a JSON object after `action:` in the instruction, as
BuiltinAnalyst writes it; a few plain-word forms are understood too); "fix" writes the most
conservative version (libm maths, double accumulators); "initial" uses the defaults.
"""
from __future__ import annotations

import dataclasses
import json
import re

from ..base import Generation, GenerationRequest
from .assemble import Built, cpp_candidate
from .candidate import HEADER_MARK, read_header
from .capture import CaptureError, capture
from .cpp_kernels import CppOptions, host_has_avx512
from .partition import PartitionError, partition
from .triton_assemble import TritonOptions, triton_candidate

TARGETS = ("cpp", "triton")


def parse_action(instruction: str | None) -> dict:
    """The action dict in a recommendation's text, or one read off plain words."""
    text = instruction or ""
    match = re.search(r"action:\s*(\{.*\})", text, re.S)
    if match:
        try:
            return json.loads(match.group(1))
        except ValueError:
            pass
    low = text.lower()
    number = re.search(r"\b(\d{2,6})\b", low)
    value = int(number.group(1)) if number else None
    if "autotun" in low:
        return {"kind": "autotune", "enable": True}
    if "num_warps" in low or "warps" in low:
        return {"kind": "warps", "value": value or 8}
    if "num_stages" in low or "stages" in low:
        return {"kind": "num_stages", "value": value or 3}
    if "block_size" in low or "block size" in low:
        return {"kind": "block_size", "value": value or 2048}
    if "vector" in low or "simd" in low:
        return {"kind": "vector_math", "enable": True}
    if "one thread" in low or "single thread" in low or "serial" in low:
        return {"kind": "min_parallel_work", "value": value or 131072}
    if "lane" in low:
        return {"kind": "lane_block", "value": value or 1024}
    if "double" in low:
        return {"kind": "accumulate", "value": "double"}
    if "dynamic" in low:
        return {"kind": "schedule", "value": "dynamic"}
    if "tensor core" in low or "tf32" in low:
        return {"kind": "tensor_cores"}
    return {"kind": "none"}


def apply_action(options, action: dict) -> tuple[object, str]:
    """New options and one sentence saying what changed (or why nothing did)."""
    kind = action.get("kind", "none")
    fields = {f.name for f in dataclasses.fields(options)}
    value = action.get("value")
    if kind in ("vector_math", "autotune") and kind in fields:
        enable = bool(action.get("enable", True))
        return dataclasses.replace(options, **{kind: enable}), f"{kind} set to {enable}"
    if kind == "matmul" and "matmul" in fields and value in ("vendor", "kernel"):
        changes = {"matmul": value}
        if "dot" in action:
            changes["dot"] = action["dot"]
        return dataclasses.replace(options, **changes), f"matmul set to {changes}"
    if kind == "warps" and "row_warps" in fields and value is not None:
        # every program of the candidate: flat ones and row ones
        return dataclasses.replace(options, num_warps=value, row_warps=value), \
            f"num_warps and row_warps set to {value}"
    if kind in fields and value is not None:
        return dataclasses.replace(options, **{kind: value}), f"{kind} set to {value}"
    if kind == "matmul_tiles" and "block_m" in fields:
        changes = {k.lower(): int(v) for k, v in action.items()
                   if k.lower() in ("block_m", "block_n", "block_k", "group_m")}
        return dataclasses.replace(options, **changes), f"matmul tiles set to {changes}"
    if kind == "tensor_cores" and "dot" in fields:
        value = value if value in ("tf32", "bf16", "fp16") else "tf32"
        return dataclasses.replace(options, matmul="kernel", dot=value), \
            f"matmul is the Triton GEMM with tl.dot in {value} (valid only under the " \
            f"{value} precision policy)"
    if kind in ("none", "done"):
        return options, "no change requested"
    if kind == "fix":
        return conservative(options), "conservative version"
    return options, f"action {kind!r} does not apply to this target; candidate unchanged"


def sweep_steps(options) -> list[dict]:
    """The knob changes a round's extra samples walk, around the options of sample 0: each
    knob on its own first, then pairs of them. Which of them change this problem's kernel is
    found by writing it (a lane block means nothing to a row softmax)."""
    if isinstance(options, CppOptions):
        lane = options.lane_block
        # the vector width first: the knob that moved most on this CPU (0.6x-2x a kernel)
        wide = [{"vector_width": 0 if options.vector_width == 512 else 512}] \
            if host_has_avx512() else []
        singles = [*wide, {"schedule": "dynamic" if options.schedule == "static" else "static"},
                   {"reuse_output": not options.reuse_output},
                   *({"accumulate": a} for a in ("float", "double") if a != options.accumulate),
                   {"min_parallel_work": 32768 if options.min_parallel_work >= 1 << 30
                    else 1 << 30},                        # all on one thread, or back
                   {"rows_as_lanes": not options.rows_as_lanes},
                   {"lane_block": lane * 2}, {"lane_block": max(32, lane // 2)},
                   {"lane_block": lane * 4}, {"lane_block": max(32, lane // 4)}]
    else:
        block, warps, tile = options.block_size, options.num_warps, options.row_tile
        # a row kernel whose rows fit in registers ignores the block size and flat warps: its
        # tile and warps come next (vary() drops the steps that change nothing that runs)
        singles = [{"block_size": block * 2}, {"block_size": max(128, block // 2)},
                   {"num_warps": 8 if warps != 8 else 4},
                   *({"row_warps": w} for w in (8, 2) if w != options.row_warps),
                   {"row_tile": tile * 4}, {"row_tile": max(256, tile // 4)},
                   {"num_stages": 4 if options.num_stages != 4 else 2},
                   {"block_size": block * 4}, {"block_size": max(128, block // 4)},
                   {"num_warps": 2 if warps != 2 else 16},
                   {"row_warps": 16 if options.row_warps != 16 else 4}]
    pairs = [{**a, **b} for i, a in enumerate(singles) for b in singles[i + 1:]
             if not set(a) & set(b)]
    return singles + pairs


def kernel_text(code: str) -> str:
    """A candidate without its header line: what tells two candidates' kernels apart."""
    return "\n".join(line for line in code.splitlines() if not line.startswith(HEADER_MARK))


def what_runs(built: Built):
    """What tells two written candidates apart at the problem's sizes: the kernels and how they
    are launched there where the writer says (Triton), else the text without its header."""
    if built.code is None:
        return None
    return built.runs if built.runs is not None else kernel_text(built.code)


def vary(options, variant: int, write, keep=frozenset()) -> tuple[object, str]:
    """Sample `variant` > 0: the same candidate with other knobs, so that a round's samples are
    a small autotuning sweep around sample 0 rather than copies of it. `write(options)` gives
    what the candidate runs (`what_runs`, or None); only steps that change it count, so no two
    variants of a round (the session numbers them across the round's branches and rounds) run
    the same unless the steps run out. Steps that touch a knob in `keep` (the ones the
    branch's instruction just set) are skipped: undoing the change would judge the parent
    again."""
    base = write(options)
    seen = {base} if base is not None else set()
    distinct = []
    for change in sweep_steps(options):
        if keep & set(change):
            continue
        runs = write(dataclasses.replace(options, **change))
        if runs is not None and runs not in seen:
            seen.add(runs)
            distinct.append(change)
            if len(distinct) >= variant:
                break
    if not distinct:
        return options, f"sample {variant}: no knob changes this kernel; same as sample 0"
    change = distinct[(variant - 1) % len(distinct)]
    said = ", ".join(f"{k} {v}" for k, v in change.items())
    return dataclasses.replace(options, **change), f"sample {variant} varies the knobs: {said}"


def conservative(options):
    if isinstance(options, CppOptions):
        return CppOptions(vector_math=False, accumulate="double", min_parallel_work=0)
    return TritonOptions(block_size=256, num_warps=4, autotune=False, matmul="vendor")


class BuiltinGenerator:
    """Deterministic generation agent: captures the reference, fuses, writes kernels."""

    def generate(self, request: GenerationRequest) -> Generation:
        target = request.target
        if target not in TARGETS:
            return Generation(None, failure=f"builtin agent cannot lower: it writes "
                              f"{' and '.join(TARGETS)} kernels, not {target}")
        precision = getattr(request, "precision", "strict")
        defaults = CppOptions() if target == "cpp" else TritonOptions.for_precision(precision)
        header = read_header(request.previous_code)
        options, applied = defaults, ""
        if header.get("target") == target and request.kind in ("optimise", "fix"):
            known = {f.name for f in dataclasses.fields(defaults)}
            options = dataclasses.replace(defaults, **{k: v for k, v in
                                                       header.get("options", {}).items()
                                                       if k in known})
        # a sample asked to make another change than the instruction's (the analyst's next
        # ranked, or one that made another lineage faster) carries that change's action
        own_change = "action:" in (request.variation or "")
        instructed = frozenset()            # the knobs the instruction set: the sweep keeps them
        if request.kind == "optimise":
            before = options
            options, applied = apply_action(options, parse_action(
                request.variation if own_change else request.instruction))
            instructed = frozenset(f.name for f in dataclasses.fields(options)
                                   if getattr(options, f.name) != getattr(before, f.name))
        elif request.kind == "fix":
            options, applied = conservative(options), "conservative version: library maths, " \
                "double accumulators, default parallelism"
        varied, lowered = "", self.lower(request)
        if request.variant and not own_change:
            options, varied = vary(options, request.variant,
                                   lambda o: what_runs(self.write(request, lowered, o)), instructed)
            applied = "; ".join(filter(None, [applied, varied]))
        built = self.write(request, lowered, options)
        if built.code is None:
            return Generation(None, response=built.failure or "", failure=built.failure,
                              notes=built.failure or "")
        notes = "; ".join(built.coverage + ([applied] if applied else []))
        response = (f"builtin agent ({request.kind}): {len(built.kernels)} kernel(s) for "
                    f"{target}. {notes}")
        return Generation(built.code, response=response, notes=notes,
                          kept_ops=list(built.kept_ops),
                          variation=varied or (request.variation if own_change else ""))

    @staticmethod
    def lower(request: GenerationRequest):
        """The reference captured and partitioned into fused groups, or why it cannot be."""
        try:
            captured = capture(request.problem.source)
            return captured, partition(captured.graph)
        except (CaptureError, PartitionError) as err:
            return f"builtin agent cannot lower: {err}"

    @staticmethod
    def write(request: GenerationRequest, lowered, options) -> Built:
        if isinstance(lowered, str):
            return Built(None, failure=lowered)
        captured, plan = lowered
        problem = request.problem
        if request.target == "cpp":
            return cpp_candidate(problem.name, problem.source, captured, plan, options)
        return triton_candidate(problem.name, problem.source, captured, plan, options)
