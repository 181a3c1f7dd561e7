"""What the shared assemble loop asks of the C++ target: its products (the register-tiled GEMM,
all or none), its kernels compiled from one `source` string, and their Python launchers."""
from __future__ import annotations

from .. import candidate as cand
from ..assemble import Assembly, kept_summary
from ..kernel import KernelPlan
from .gemm import MICRO_KERNEL, CppGemm, epilogue_for
from .kernels import CppKernel, cpp_source
from .maths import FUNCTIONS
from .passes import pointer

IMPORTS = ("import math\n\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F"
           "\n\nfrom kforge_nb.runtime import cpp")


def launcher_lines(kp: KernelPlan, call: str, launcher: str) -> list[str]:
    """The Python wrapper around one kernel: contiguous inputs, sizes, outputs, the call."""
    lines = cand.launcher_prologue(kp, launcher, "Runs")
    names = [r.size_name for r in kp.regions]
    call_args = [pointer(n) for n in kp.inputs + kp.outputs] + \
        [f"float({s.name})" for s in kp.scalars] + names
    lines.append(f"    {call}({', '.join(call_args)})")
    lines.append(f"    return {', '.join(o.name for o in kp.outputs)}")
    return lines


class CppAssembly(Assembly):
    target = "cpp"
    about = "C++ kernels for the CPU, written by kforge-nb's builtin agent (no LLM)."
    language = "C++, OpenMP"
    lowered_to = "C++"
    nothing_left = "no elementwise or reduction work left to put in a kernel"

    def __init__(self, *args):
        super().__init__(*args)
        self.helpers: set[str] = set()

    def own_products(self, matmuls):
        # every product or none: the generated GEMM when asked for, or when nothing else is left
        own = self.o.matmul == "kernel" or (matmuls and not self.plan.groups)
        return list(matmuls) if own else []

    def kept(self, matmuls, own):
        return kept_summary(self.plan, vendor_matmul=not own)

    def epilogue_for(self, node):
        return epilogue_for(self.plan, node)

    def product_base(self, base: str) -> str:
        return base.lower()

    def product(self, node, name, epilogue, function):
        gemm = CppGemm(node, name, epilogue, self.o)
        if not gemm.matvec and MICRO_KERNEL.strip("\n") not in self.kernels:
            self.kernels.insert(0, MICRO_KERNEL.strip("\n"))
        self.kernels.append(gemm.kernel())
        self.maths_used(gemm.helpers, gemm.libm)
        self.facts.add(gemm.facts)
        arguments = [gemm.a, gemm.b] + ([gemm.bias] if gemm.bias is not None else []) + \
            gemm.ep_inputs + (epilogue.scalars if epilogue else [])
        what = "register-tiled matrix product" + \
            (" with the ops after it applied before the store" if epilogue else "")
        return gemm.launcher(function), arguments, gemm.outputs, what

    def maths_used(self, helpers, libm):
        self.helpers |= helpers
        self.facts.vector_math |= {n for n in helpers if n in FUNCTIONS}
        self.facts.scalar_math |= {n for n in libm if n in FUNCTIONS}

    def group(self, kp, name, launcher):
        writer = CppKernel(kp, self.o)
        self.kernels.append(writer.write())
        self.maths_used(writer.f.used, writer.f.libm)
        self.facts.add(writer.facts)
        return launcher_lines(kp, f"kernels.{name}", launcher)

    def imports(self) -> str:
        return IMPORTS

    def kernel_text(self) -> str:
        return ("# The C++ below is compiled once (g++ -O3 -march=native -fopenmp, strict IEEE "
                "maths) and\n# cached by its hash; every extern \"C\" function becomes a Python "
                "callable that takes\n# contiguous tensors for pointers (bf16 and fp16 as their 16 "
                'bits) and Python numbers for sizes.\nsource = r"""\n' +
                cpp_source(self.kernels, self.helpers, self.o, self.facts.lane_block) + '"""\n\n'
                "kernels = cpp.load(source)")
