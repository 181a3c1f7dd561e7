"""The one assemble loop: a partitioned reference turned into a complete candidate file.

`Assembly.build()` walks the plan the same way for every target: the matrix products the
target writes itself (each with the pointwise group after it fused in, where that group is
ready when the product runs), then one kernel per remaining fused group, then the candidate
file (docstring, imports, the reference's support code, the `# kforge-builtin:` header, the
kernels, their launchers, ModelNew). A target subclasses `Assembly` and gives only its
specifics: which products it owns, how a product and a group are written, its imports and
how its kernels sit in the file (cpp/assemble.py, triton/assemble.py). The facts of the code
(candidate.CodeFacts) are gathered as it is written, from each writer, for the header.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from . import candidate as cand
from . import templates
from .capture import Captured, Schedule
from .capture.ir import HALF, Node
from .kernel import KernelPlan, kernel_name, kernel_name_from, launcher_name


@dataclass
class Built:
    code: str | None
    kept_ops: list[str] = field(default_factory=list)
    coverage: list[str] = field(default_factory=list)     # lines for Generation.notes
    kernels: list[str] = field(default_factory=list)
    failure: str | None = None
    runs: tuple | None = None         # what runs at the captured sizes, where the text says more


def kept_summary(plan: Schedule, vendor_matmul: bool) -> tuple[list[str], list[str]]:
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


def vendor_products(plan: Schedule, own: list[Node]) -> list[str]:
    """The matrix products forward leaves to the vendor's GEMM: those the target does not
    write itself, and those the capture kept as a torch call (F.linear, torch.matmul...)."""
    products = []
    for kind, item in plan.steps:
        if kind == "matmul" and item not in own:
            products.append(item.fn)
        elif kind == "host" and item.fn == "kept" and cand.kept_product(item):
            products.append(cand.kept_product(item))
    return products


def lowered_ops(plan: Schedule) -> list[str]:
    ops = []
    for g in plan.groups:
        for m in g.members:
            label = m.origin or m.fn
            if m.op != "host" and label not in ops:
                ops.append(label)
    return ops


def ready_at(plan: Schedule, node: Node, group) -> bool:
    """Whether everything `group` reads exists when `node`'s step runs (to fuse them)."""
    at = next(i for i, (k, x) in enumerate(plan.steps) if x is node)
    end = next(i for i, (k, x) in enumerate(plan.steps) if k == "group" and x is group)
    later = {x for k, x in plan.steps[at + 1:end] if k != "group"}
    later |= {m for k, g in plan.steps[at + 1:end] if k == "group" for m in g.members}
    return not (later & set(KernelPlan.build(group, "probe").inputs))


def half_precision(group) -> bool:
    """Whether a group reads or computes bf16 / fp16 values: its own kernel converts them (a
    GEMM's epilogue reads float32 only)."""
    values = list(group.members) + KernelPlan.build(group, "probe").inputs
    return any(n.dtype in HALF for n in values)


class Assembly:
    """One candidate being assembled; a target overrides the hooks below `build`."""

    target = ""                 # the header's target name
    about = ""                  # the docstring's first line, after the problem's title
    language = ""               # how the story names a kernel's language: "C++, OpenMP"
    lowered_to = ""             # how the coverage names it: "C++"
    nothing_left = ""           # why there is no candidate when no kernel is left to write
    title_line = 0              # the line of a kernel's text that names it

    def __init__(self, title: str, source: str, cap: Captured, plan: Schedule, options,
                 writers: dict[str, templates.Writer]):
        self.title, self.source, self.cap, self.plan, self.o = title, source, cap, plan, options
        self.writers = writers            # template family -> this target's writer
        self.kernels: list[str] = []
        self.launchers: list[str] = []
        self.story: list[str] = []
        self.launches: dict = {}          # group index -> (launcher, its arguments, outputs)
        self.products: dict = {}          # product node -> the forward lines that call it
        self.taken: set[str] = set()      # kernel names given out
        self.facts = cand.CodeFacts()     # what the header tells the analyst of this code

    def build(self) -> Built:
        plan = self.plan
        matmuls = [item for kind, item in plan.steps if kind == "matmul"]
        own = self.own_products(matmuls)
        allow, labels = self.kept(matmuls, own)
        self.facts.vendor_gemm = vendor_products(plan, own)
        written = self.own_templates()
        for node in (item for kind, item in plan.steps if kind == "template"):
            if node not in written:
                allow = sorted(set(allow) | set(node.attrs["allow"].split(",")))
                labels.append(node.attrs["label"] or node.fn)
        if not plan.groups and not own and not written:
            return Built(None, allow, failure="builtin agent cannot lower: " +
                         (", ".join(labels) or "nothing") + f" ({self.nothing_left})")
        fused = set()
        for node in own:
            group = self.epilogue_for(node)
            if group is not None and (not ready_at(plan, node, group) or half_precision(group)):
                group = None
            epilogue = None
            if group is not None:
                epilogue = KernelPlan.build(group, "epilogue")
                fused.add(group.index)
            base = node.fn + ("_" + "_".join(dict.fromkeys(m.origin or m.fn for m in group.members
                                                          if m.op != "host")) if group else "")
            self.add_product(node, kernel_name_from(self.product_base(base), self.taken),
                             epilogue)
        for node, (name, done) in written.items():
            self.add_template(node, name, done)
        for group in plan.groups:
            if group.index not in fused:
                self.add_group(group)
        code = self.candidate(labels)
        ops = lowered_ops(plan) + [n.fn for n in own] + \
            [n.attrs["label"] or n.fn for n in written]
        coverage = [f"lowered to {self.lowered_to}: {', '.join(dict.fromkeys(ops))} in "
                    f"{len(self.kernels)} kernel(s)"]
        if labels:
            coverage.append(f"left to torch: {', '.join(labels)}")
        coverage += self.cap.notes
        return Built(code, allow, coverage, [k.split("\n")[self.title_line] for k in self.kernels],
                     runs=self.runs(own + list(written)))

    def add_product(self, node: Node, name: str, epilogue: KernelPlan | None) -> None:
        """A product the target writes: its kernel, launcher, the call in forward, the story."""
        function = launcher_name(name)
        launcher, arguments, outputs, what = self.product(node, name, epilogue, function)
        self.launchers.append("\n".join(launcher))
        self.products[node] = [f"{', '.join(o.name for o in outputs)} = {function}("
                               f"{', '.join(cand.python_ref(a) for a in arguments)})"]
        self.story.append(f"- `{name}` ({self.language}): {what}")

    def own_templates(self) -> dict:
        """node -> its `templates.Written` kernel, for the template ops this candidate writes:
        each one a family covers, when no fused group is left to write (the vendor's
        convolution beside fused kernels is what the groups are measured with); a gather or
        scatter whatever else is left (templates.OWN_BESIDE_GROUPS)."""
        nodes = [item for kind, item in self.plan.steps if kind == "template" and
                 (not self.plan.groups or item.fn in templates.OWN_BESIDE_GROUPS)]
        if not nodes:
            return {}
        found = {}
        for node in nodes:
            name = kernel_name_from(node.attrs["call"], self.taken)
            done = templates.write(node, self.writers, name, launcher_name(name), self.o)
            if done is not None:
                found[node] = (name, done)
        return found

    def add_template(self, node: Node, name: str, done) -> None:
        """A template op's kernel, launcher, the call in forward, the story."""
        self.kernels.append(done.kernel)
        self.launchers.append("\n".join(done.launcher))
        self.maths_used(done.helpers, done.libm)
        self.facts.openmp |= done.openmp
        function = launcher_name(name)
        self.products[node] = [f"{', '.join(o.name for o in done.outputs)} = {function}("
                               f"{', '.join(cand.python_ref(a) for a in done.arguments)})"]
        self.story.append(f"- `{name}` ({self.language}): "
                          f"{done.what}")

    def maths_used(self, helpers: set[str], libm: set[str]) -> None:
        """C++ keeps the maths helpers its kernels call and notes the libm calls; other targets
        have neither."""

    def add_group(self, group) -> None:
        """One fused group's kernel and launcher, and how forward calls it."""
        name = kernel_name(group, self.taken)
        kp = KernelPlan.build(group, name)
        launcher = launcher_name(name)
        self.launchers.append("\n".join(self.group(kp, name, launcher)))
        self.launches[group.index] = (launcher, kp.inputs + kp.scalars, kp.outputs)
        if kp.reduce:
            self.facts.reductions.append(kp.reduced_extent())
        self.story.append(f"- `{name}` ({self.language}): {kp.story()[0]}")

    def candidate(self, labels: list[str]) -> str:
        """The candidate file's text."""
        plan, products = self.plan, self.products
        support, init = cand.reference_parts(self.source)
        body = cand.forward_lines(plan, self.launches, lambda node: products[node]
                                  if node in products else cand.vendor_matmul(node)
                                  if node.op == "matmul" else templates.vendor_lines(node))
        doc = self.story + ([f"- kept in torch: {', '.join(labels)}"] if labels else []) + \
            [f"- {n}" for n in self.cap.notes]
        parts = [
            cand.docstring(f"{self.title}: {self.about}", doc),
            self.imports(),
            "\n\n".join(s for s in support if s and not s.startswith(
                ("import torch", "from torch", "import math"))),
            cand.HEADER_MARK,             # where the header goes, once the rest is written
            self.kernel_text(),
            "\n\n\n".join(self.launchers),
            cand.model_class(init, [n.name for n in plan.graph.inputs], body),
        ]
        code = "\n\n\n".join(p for p in parts if p.strip()) + "\n"
        return cand.stamped(code, self.target, dataclasses.asdict(self.o), self.facts)

    # --- what each target gives ---------------------------------------------------------------
    def own_products(self, matmuls: list[Node]) -> list[Node]:
        """The products this candidate computes in its own kernels (the rest stay vendor)."""
        raise NotImplementedError

    def kept(self, matmuls: list[Node], own: list[Node]) -> tuple[list[str], list[str]]:
        """(allow tokens, labels) of what stays in torch, vendor products included."""
        raise NotImplementedError

    def epilogue_for(self, node: Node):
        """The pointwise group this target can apply in the product's kernel, or None."""
        raise NotImplementedError

    def product_base(self, base: str) -> str:
        return base

    def product(self, node: Node, name: str, epilogue: KernelPlan | None, function: str):
        """Write the product's kernel (into self.kernels); (launcher lines, the launcher's
        arguments, its outputs, what the story says it does)."""
        raise NotImplementedError

    def group(self, kp: KernelPlan, name: str, launcher: str) -> list[str]:
        """Write a fused group's kernel(s) (into self.kernels); its launcher's lines."""
        raise NotImplementedError

    def imports(self) -> str:
        raise NotImplementedError

    def kernel_text(self) -> str:
        """How the kernels sit in the file."""
        raise NotImplementedError

    def runs(self, own: list[Node]) -> tuple | None:
        """What runs at the captured sizes, where it says more than the text (the sweep)."""
        return None
