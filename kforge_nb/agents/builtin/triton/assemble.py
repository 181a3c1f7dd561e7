"""What the shared assemble loop asks of the Triton target.

Matrix products follow the precision policy. Under strict fp32 the product stays the vendor
call (F.linear, torch.mm/bmm/matmul: cuBLAS on a GPU, already near the speed of light) and
everything after it becomes one Triton kernel per fused group, which reads the product once
and writes the output once. When the policy allows tf32 / bf16 / fp16, or when asked for
(`matmul="kernel"`), the product is the tiled Triton GEMM of `gemm.py` with the pointwise ops
after it applied to the tile. A lone product with nothing to fuse gets the Triton GEMM as
well, exact fp32 (`tl.dot` in "ieee" precision) under the strict policy.
"""
from __future__ import annotations

from ..assemble import Assembly, kept_summary
from ..elementwise import BF16_DEFINITIONS, BF16_HELPERS, RECIPROCAL_FLAG, \
    RECIPROCAL_FLAG_DEFINITION
from .gemm import TritonGemm, epilogue_for, operands
from .group import TritonGroupKernel, launch_at_capture
from .split import TritonSplitKernels, can_split


class TritonAssembly(Assembly):
    target = "triton"
    about = "Triton kernels written by kforge-nb's builtin agent (no LLM)."
    language = "Triton"
    lowered_to = "Triton"
    nothing_left = "no work left to put in a kernel"
    title_line = 1                    # the line after the kernel's decorator

    def __init__(self, *args):
        super().__init__(*args)
        self.launches_here: list = []     # how each group's kernel is launched at the sizes

    def own_products(self, matmuls):
        return [m for m in matmuls if operands(m) is not None and
                (self.o.matmul == "kernel" or not self.plan.groups)]

    def kept(self, matmuls, own):
        allow, labels = kept_summary(self.plan, vendor_matmul=False)
        vendor = [m for m in matmuls if m not in own]
        return sorted(set(allow) | {m.fn for m in vendor}), \
            labels + [f"{m.fn} (vendor GEMM)" for m in dict.fromkeys(vendor)]

    def epilogue_for(self, node):
        return epilogue_for(self.plan, node)

    def product(self, node, name, epilogue, function):
        gemm = TritonGemm(node, name, self.o, epilogue)
        self.kernels.append(gemm.kernel())
        self.facts.triton_dot_by_sum |= gemm.dot_by_sum
        what = f"tiled matrix product ({self.o.dot})" + \
            (" with the pointwise ops after it applied to the tile" if epilogue else "")
        return gemm.launcher(function), gemm.arguments(), gemm.outputs, what

    def group(self, kp, name, launcher):
        writer = TritonGroupKernel(kp, self.o)
        self.kernels.append(writer.write())
        split = TritonSplitKernels(kp, self.o) if can_split(kp) else None
        if split is not None:
            self.kernels += split.kernels()
        self.launches_here.append(launch_at_capture(kp, self.o, split is not None))
        return writer.launcher(launcher, split)

    def imports(self) -> str:
        return "import math\n" + ("import os\n" if self.o.dot == "bf16" and self.products
                                  else "") + \
            "\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n" \
            "import triton\nimport triton.language as tl"

    def kernel_text(self) -> str:
        text = "\n\n\n".join(self.kernels)
        if any(f"{helper}(" in text for helper in BF16_HELPERS):    # a kernel reads bf16
            text = BF16_DEFINITIONS + "\n\n\n" + text
        if RECIPROCAL_FLAG in text:      # a kernel divides by a number as torch does
            text = RECIPROCAL_FLAG_DEFINITION + "\n\n\n" + text
        return text

    def runs(self, own):
        return None if own else (tuple(self.kernels), tuple(self.launches_here))
