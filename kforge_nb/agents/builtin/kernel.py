"""What one fused group needs from any target: operands, passes, names, the story to tell.

A group's kernel runs in *passes* over its reduced dims: pass p computes every reduction whose
input depends only on reductions of earlier passes (softmax: pass 0 the max, pass 1 the sum of
exp(x - max)); after each pass the kept values that became computable are evaluated (the mean,
1/sqrt(var + eps)); a final pass writes the full-size outputs. A group without reductions is
the final pass alone.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .capture.ir import Node
from .capture.partition import Group, Region


@dataclass
class KernelPlan:
    group: Group
    name: str
    regions: list[Region]
    inputs: list[Node] = field(default_factory=list)     # external tensors, first use first
    scalars: list[Node] = field(default_factory=list)    # Python numbers computed in forward
    outputs: list[Node] = field(default_factory=list)
    passes: list[list[Node]] = field(default_factory=list)
    kept_after: list[list[Node]] = field(default_factory=list)

    @classmethod
    def build(cls, group: Group, name: str) -> "KernelPlan":
        plan = cls(group, name, group.regions(), outputs=list(group.outputs))
        for m in group.members:
            for a in m.node_args():
                if a in group.cover and a in group.member_set:
                    continue
                if a.is_tensor and a not in plan.inputs:
                    plan.inputs.append(a)
                elif not a.is_tensor and a not in plan.scalars:
                    plan.scalars.append(a)
        avail: dict[Node, int] = {}
        for m in group.members:
            deps = [avail.get(a, 0) for a in m.node_args() if a in group.member_set]
            avail[m] = max(deps, default=0) + (1 if m.op == "reduce" else 0)
        count = max((avail[m] for m in group.members), default=0)
        plan.passes = [[m for m in group.members if m.op == "reduce" and avail[m] == p + 1]
                       for p in range(count)]
        plan.kept_after = [[m for m in group.members if m.op == "pointwise" and
                            group.space[m] == "kept" and avail[m] == p + 1]
                           for p in range(count)]
        return plan

    def rows_as_lanes(self) -> "KernelPlan":
        """The same kernel with its innermost row dim walked as lanes: a block of rows per
        task, one accumulator per row, and the simd loop across rows (strided loads). It pays
        when the reduced extent is too short to fill a vector (a logsumexp over rows of 2),
        and is the plan itself when there is no such dim or the lanes are taken."""
        rows = [k for k, r in enumerate(self.regions) if r.role == "row"]
        if not rows or not self.reduce or self.lane is not None:
            return self
        regions = [dataclasses.replace(r) for r in self.regions]
        regions[rows[-1]].role = "lane"
        return dataclasses.replace(self, regions=regions)

    def reduced_extent(self) -> int:
        """Elements per reduction at capture time (1 for a kernel without reductions)."""
        extent = 1
        for r in self.reduce:
            extent *= r.size
        return extent

    # -- lookups the writers share ------------------------------------------------------------
    def space(self, node: Node) -> str | None:
        return self.group.space.get(node) if node in self.group.member_set else None

    def source(self, node: Node) -> Node:
        """A view inside the group is the same data: look through it."""
        while node in self.group.member_set and node.op == "host":
            node = node.args[0]
        return node

    def element_values(self, targets: list[Node], kept_scope: bool = False,
                       stop: frozenset = frozenset()) -> list[Node]:
        """Members to compute (in order) so that `targets` can be evaluated in this scope."""
        need, todo = set(), [self.source(t) for t in targets]
        while todo:
            n = todo.pop()
            if n in need or n not in self.group.member_set or n in stop:
                continue
            space = self.group.space[n]
            if space == "kept" or (kept_scope and space == "full"):
                continue
            if n.op in ("pointwise", "scan"):
                need.add(n)
                todo.extend(self.source(a) for a in n.node_args())
        return [m for m in self.group.members if m in need]

    def region_of(self, fid: int) -> Region:
        return next(r for r in self.regions if fid in r.ids)

    def index_regions(self, ids) -> list[Region]:
        """The regions an operand varies along (it is read at stride 0 across the others)."""
        ids = set(ids)
        return [r for r in self.regions if r.ids and set(r.ids) <= ids]

    def output_regions(self, node: Node) -> list[Region]:
        space = self.group.space[node]
        return [r for r in self.regions if space == "full" or not r.reduced]

    @property
    def rows(self) -> list[Region]:
        return [r for r in self.regions if r.role == "row"]

    @property
    def reduce(self) -> list[Region]:
        return [r for r in self.regions if r.role == "reduce"]

    @property
    def lane(self) -> Region | None:
        return next((r for r in self.regions if r.role == "lane"), None)

    def full_outputs(self) -> list[Node]:
        return [o for o in self.outputs if self.group.space[o] == "full"]

    def kept_outputs(self) -> list[Node]:
        return [o for o in self.outputs if self.group.space[o] == "kept"]

    def story(self) -> list[str]:
        """Comment lines: what the kernel computes and how it walks the data."""
        ops = []
        for m in self.group.members:
            label = m.origin or m.fn
            if label and label not in ops and m.op != "host":
                ops.append(label)
        shape = " x ".join(f"{r.size_name} ({r.size})" for r in self.regions)
        lines = [f"Fuses: {', '.join(ops)}.",
                 f"Index space [{shape}] (sizes at capture time; the kernel takes them as "
                 f"arguments)."]
        if self.reduce:
            names = ", ".join(r.size_name for r in self.reduce)
            lines.append(f"Reduces over {names} ({self.reduced_extent()} elements each): "
                         f"{len(self.passes)} pass(es) over the data, then "
                         f"{'a final pass writes the output' if self.full_outputs() else 'the results are written per row'}.")
        return lines


def launcher_name(kernel: str) -> str:
    """The Python wrapper of a kernel: softmax_kernel -> fused_softmax, x_kernel_2 -> fused_x_2."""
    return "fused_" + kernel.replace("_kernel", "", 1)


def kernel_name(group: Group, taken: set[str]) -> str:
    labels = []
    for m in group.members:
        label = (m.origin or m.fn).lower().replace(" ", "_")
        if m.op != "host" and label and label not in labels and label.isidentifier():
            labels.append(label)
    base = "_".join(labels) if len(labels) <= 3 else f"{labels[0]}_to_{labels[-1]}"
    return kernel_name_from(base or "fused", taken)


def kernel_name_from(base: str, taken: set[str]) -> str:
    """`base`_kernel, numbered past the names already `taken` (and taken from now on)."""
    name, k = f"{base}_kernel", 2
    while name in taken:
        name, k = f"{base}_kernel_{k}", k + 1
    taken.add(name)
    return name
