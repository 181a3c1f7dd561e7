"""Turn a partitioned reference into a complete candidate for one target."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from . import candidate as cand
from .capture import Captured
from .cpp_gemm import MICRO_KERNEL, CppGemm, epilogue_for
from .cpp_kernels import CppKernel, CppOptions, cpp_source
from .ir import Node
from .kernel import KernelPlan, kernel_name, launcher_name
from .partition import Plan


@dataclass
class Built:
    code: str | None
    kept_ops: list[str] = field(default_factory=list)
    coverage: list[str] = field(default_factory=list)     # lines for Generation.notes
    kernels: list[str] = field(default_factory=list)
    failure: str | None = None
    runs: tuple | None = None         # what runs at the captured sizes, where the text says more


def kept_summary(plan: Plan, vendor_matmul: bool) -> tuple[list[str], list[str]]:
    """(allow tokens for the guardrails, human labels) of the torch ops left in forward."""
    allow, labels = [], []
    for kind, item in plan.steps:
        if kind == "host" and item.fn == "kept":
            labels.append(item.attrs.get("label") or item.attrs["expr"])
            if item.attrs.get("allow"):     # one token, or a module's functions, comma-joined
                allow += item.attrs["allow"].split(",")
        elif kind == "matmul" and vendor_matmul:
            labels.append(f"{item.fn} (vendor GEMM)")
            allow.append(item.fn)
    return sorted(set(allow)), labels


def lowered_ops(plan: Plan) -> list[str]:
    ops = []
    for g in plan.groups:
        for m in g.members:
            label = m.origin or m.fn
            if m.op != "host" and label not in ops:
                ops.append(label)
    return ops


def launcher_lines(kp: KernelPlan, call: str, launcher: str) -> list[str]:
    """The Python wrapper around one kernel: contiguous inputs, sizes, outputs, the call."""
    lines = cand.launcher_prologue(kp, launcher, "Runs")
    names = [r.size_name for r in kp.regions]
    call_args = [n.name for n in kp.inputs] + [o.name for o in kp.outputs] + \
        [f"float({s.name})" for s in kp.scalars] + names
    lines.append(f"    {call}({', '.join(call_args)})")
    lines.append(f"    return {', '.join(o.name for o in kp.outputs)}")
    return lines


def cpp_candidate(title: str, source: str, cap: Captured, plan: Plan,
                  options: CppOptions) -> Built:
    matmuls = [item for kind, item in plan.steps if kind == "matmul"]
    own_gemm = options.matmul == "kernel" or (matmuls and not plan.groups)
    allow, labels = kept_summary(plan, vendor_matmul=not own_gemm)
    if not plan.groups and not matmuls:
        what = ", ".join(labels) or "nothing"
        return Built(None, allow, failure=f"builtin agent cannot lower: {what} (no elementwise "
                     "or reduction work left to put in a kernel)")
    taken: set[str] = set()
    kernels, launchers, launches, helpers, story = [], [], {}, set(), []
    products, fused = {}, set()
    for node in matmuls if own_gemm else []:
        group = epilogue_for(plan, node)
        if group is not None and not ready_at(plan, node, group):
            group = None
        plan_ep = None
        if group is not None:
            plan_ep = KernelPlan.build(group, "epilogue")
            fused.add(group.index)
        base = node.fn + ("_" + "_".join(dict.fromkeys(m.origin or m.fn for m in group.members
                                                      if m.op != "host")) if group else "")
        name = kernel_name_from(base.lower(), taken)
        gemm = CppGemm(node, name, plan_ep, options)
        if not gemm.matvec and MICRO_KERNEL.strip("\n") not in kernels:
            kernels.insert(0, MICRO_KERNEL.strip("\n"))
        kernels.append(gemm.kernel())
        helpers |= gemm.helpers
        function = launcher_name(name)
        launchers.append("\n".join(gemm.launcher(function)))
        args = [gemm.a, gemm.b] + ([gemm.bias] if gemm.bias is not None else []) + \
            gemm.ep_inputs + (plan_ep.scalars if plan_ep else [])
        products[node] = [f"{', '.join(o.name for o in gemm.outputs)} = {function}("
                          f"{', '.join(cand.python_ref(a) for a in args)})"]
        story.append(f"- `{name}` (C++, OpenMP): register-tiled matrix product"
                     + (" with the ops after it applied before the store" if group else ""))
    for group in plan.groups:
        if group.index in fused:
            continue
        name = kernel_name(group, taken)
        kp = KernelPlan.build(group, name)
        writer = CppKernel(kp, options)
        kernels.append(writer.write())
        helpers |= writer.f.used
        launcher = launcher_name(name)
        launchers.append("\n".join(launcher_lines(kp, f"kernels.{name}", launcher)))
        launches[group.index] = (launcher, kp.inputs + kp.scalars, kp.outputs)
        story.append(f"- `{name}` (C++, OpenMP): {kp.story()[0]}")
    support, init = cand.reference_parts(source)
    body = cand.forward_lines(plan, launches, lambda node: products[node] if node in products
                              else cand.vendor_matmul(node))
    doc = story + ([f"- kept in torch: {', '.join(labels)}"] if labels else []) + \
        [f"- {n}" for n in cap.notes]
    options_dict = dataclasses.asdict(options)
    parts = [
        cand.docstring(f"{title}: C++ kernels for the CPU, written by kforge-nb's builtin "
                       "agent (no LLM).", doc),
        "import math\n\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
        "from kforge_nb.runtime import cpp",
        "\n\n".join(s for s in support if s and not s.startswith(("import torch", "from torch",
                                                                   "import math"))),
        cand.header_line("cpp", options_dict),
        "# The C++ below is compiled once (g++ -O3 -march=native -fopenmp, strict IEEE maths) and\n"
        "# cached by its hash; every extern \"C\" function becomes a Python callable that takes\n"
        "# contiguous float32 tensors for pointers and Python numbers for sizes.\n"
        'source = r"""\n' + cpp_source(kernels, helpers, options) + '"""\n\n'
        "kernels = cpp.load(source)",
        "\n\n\n".join(launchers),
        cand.model_class(init, [n.name for n in plan.graph.inputs], body),
    ]
    code = "\n\n\n".join(p for p in parts if p.strip()) + "\n"
    lowered = lowered_ops(plan) + [n.fn for n in matmuls if own_gemm]
    coverage = [f"lowered to C++: {', '.join(dict.fromkeys(lowered))} in {len(kernels)} kernel(s)"]
    if labels:
        coverage.append(f"left to torch: {', '.join(labels)}")
    coverage += cap.notes
    return Built(code, allow, coverage, [k.split("\n")[0] for k in kernels])


def ready_at(plan: Plan, node: Node, group) -> bool:
    """Whether everything `group` reads exists when `node`'s step runs (to fuse them)."""
    at = next(i for i, (k, x) in enumerate(plan.steps) if x is node)
    end = next(i for i, (k, x) in enumerate(plan.steps) if k == "group" and x is group)
    later = {x for k, x in plan.steps[at + 1:end] if k != "group"}
    later |= {m for k, g in plan.steps[at + 1:end] if k == "group" for m in g.members}
    return not (later & set(KernelPlan.build(group, "probe").inputs))


def kernel_name_from(base: str, taken: set[str]) -> str:
    name, k = f"{base}_kernel", 2
    while name in taken:
        name, k = f"{base}_kernel_{k}", k + 1
    taken.add(name)
    return name
