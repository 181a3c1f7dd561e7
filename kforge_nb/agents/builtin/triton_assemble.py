"""Turn a partitioned reference into a Triton candidate.

Matrix products follow the precision policy. Under strict fp32 the product stays the vendor
call (F.linear, torch.mm/bmm/matmul: cuBLAS on a GPU, already near the speed of light) and
everything after it becomes one Triton kernel per fused group, which reads the product once
and writes the output once. When the policy allows tf32 / bf16 / fp16, or when asked for
(`matmul="kernel"`), the product is the tiled Triton GEMM of `triton_gemm.py` with the
pointwise ops after it applied to the tile. A lone product with nothing to fuse gets the
Triton GEMM as well, exact fp32 (`tl.dot` in "ieee" precision) under the strict policy.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from . import candidate as cand
from .assemble import Built, kept_summary, lowered_ops, ready_at
from .capture import Captured
from .kernel import KernelPlan, kernel_name, launcher_name
from .partition import Plan
from .triton_gemm import TritonGemm, epilogue_for, operands
from .triton_group import TritonGroupKernel, launch_at_capture
from .triton_split import TritonSplitKernels, can_split

LOWER_PRECISION = ("tf32", "bf16", "fp16")


@dataclass
class TritonOptions:
    block_size: int = 1024            # elements per program (pointwise) or per loop step (rows)
    num_warps: int = 4                # warps of a flat program (and of a long row's splits)
    num_stages: int = 0               # software-pipelining stages of a row loop; 0: Triton's own
    row_warps: int = 0                # warps of a row program; 0: by its tile (row_warps())
    row_tile: int = 2048              # elements a program takes on when its rows are short
    autotune: bool = False            # let @triton.autotune choose BLOCK_SIZE and num_warps
    matmul: str = "vendor"            # "vendor": keep the torch call; "kernel": the Triton GEMM
    block_m: int = 64                 # matmul tiles (the GEMM autotunes them on a GPU)
    block_n: int = 64
    block_k: int = 32
    group_m: int = 8
    dot: str = "ieee"                 # ieee | fma (exact fp32) | tf32 | bf16 | fp16

    @classmethod
    def for_precision(cls, precision: str) -> "TritonOptions":
        """Defaults for a precision policy: the vendor product under strict fp32, the Triton
        GEMM on the tensor cores when the policy allows lower precision."""
        if precision in LOWER_PRECISION:
            return cls(matmul="kernel", dot=precision, block_m=64, block_n=64, block_k=32)
        return cls()


def triton_candidate(title: str, source: str, cap: Captured, plan: Plan,
                     options: TritonOptions) -> Built:
    matmuls = [item for kind, item in plan.steps if kind == "matmul"]
    own = {m for m in matmuls if operands(m) is not None and
           (options.matmul == "kernel" or not plan.groups)}
    allow, labels = kept_summary(plan, vendor_matmul=False)
    vendor = [m for m in matmuls if m not in own]
    allow = sorted(set(allow) | {m.fn for m in vendor})
    labels += [f"{m.fn} (vendor GEMM)" for m in dict.fromkeys(vendor)]
    if not plan.groups and not own:
        return Built(None, allow, failure="builtin agent cannot lower: " +
                     (", ".join(labels) or "nothing") + " (no work left to put in a kernel)")
    taken: set[str] = set()
    kernels, launchers, launches, story = [], [], {}, []
    launches_here = []                  # how each kernel is launched at the captured sizes
    products, fused = {}, set()
    for node in matmuls:
        if node not in own:
            continue
        group = epilogue_for(plan, node)
        if group is not None and not ready_at(plan, node, group):
            group = None
        kp = None
        base = node.fn
        if group is not None:
            kp = KernelPlan.build(group, "epilogue")
            base += "_" + "_".join(dict.fromkeys(m.origin or m.fn for m in group.members
                                                 if m.op != "host"))
            fused.add(group.index)
        name, k = f"{base}_kernel", 2
        while name in taken:
            name, k = f"{base}_kernel_{k}", k + 1
        taken.add(name)
        gemm = TritonGemm(node, name, options, kp)
        kernels.append(gemm.kernel())
        function = launcher_name(name)
        launchers.append("\n".join(gemm.launcher(function)))
        call = f"{function}({', '.join(cand.python_ref(a) for a in gemm.arguments())})"
        products[node] = [f"{', '.join(x.name for x in gemm.outputs)} = {call}"]
        story.append(f"- `{name}` (Triton): tiled matrix product ({options.dot})" +
                     (" with the pointwise ops after it applied to the tile" if kp else ""))
    for group in plan.groups:
        if group.index in fused:
            continue
        name = kernel_name(group, taken)
        kp = KernelPlan.build(group, name)
        writer = TritonGroupKernel(kp, options)
        kernels.append(writer.write())
        split = TritonSplitKernels(kp, options) if can_split(kp) else None
        if split is not None:
            kernels += split.kernels()
        launcher = launcher_name(name)
        launchers.append("\n".join(writer.launcher(launcher, split)))
        launches_here.append(launch_at_capture(kp, options, split is not None))
        launches[group.index] = (launcher, kp.inputs + kp.scalars, kp.outputs)
        story.append(f"- `{name}` (Triton): {kp.story()[0]}")
    support, init = cand.reference_parts(source)
    body = cand.forward_lines(plan, launches, lambda node: products[node] if node in products
                              else cand.vendor_matmul(node))
    doc = story + ([f"- kept in torch: {', '.join(labels)}"] if labels else []) + \
        [f"- {n}" for n in cap.notes]
    parts = [
        cand.docstring(f"{title}: Triton kernels written by kforge-nb's builtin agent (no LLM).",
                       doc),
        "import math\n" + ("import os\n" if options.dot == "bf16" and products else "") +
        "\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
        "import triton\nimport triton.language as tl",
        "\n\n".join(s for s in support if s and not s.startswith(("import torch", "from torch",
                                                                   "import math"))),
        cand.header_line("triton", dataclasses.asdict(options)),
        "\n\n\n".join(kernels),
        "\n\n\n".join(launchers),
        cand.model_class(init, [n.name for n in plan.graph.inputs], body),
    ]
    code = "\n\n\n".join(p for p in parts if p.strip()) + "\n"
    ops = lowered_ops(plan) + [m.fn for m in matmuls if m in own]
    coverage = [f"lowered to Triton: {', '.join(dict.fromkeys(ops))} in {len(kernels)} kernel(s)"]
    if labels:
        coverage.append(f"left to torch: {', '.join(labels)}")
    coverage += cap.notes
    return Built(code, allow, coverage, [k.split("\n")[1] for k in kernels],
                 runs=None if own else (tuple(kernels), tuple(launches_here)))


__all__ = ["TritonOptions", "triton_candidate"]
