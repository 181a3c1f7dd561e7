"""Cut the graph into fused groups (one kernel each) and the Python steps between them.

A group is a run of pointwise and reduce nodes that one kernel can compute in a single sweep
over a common index space. The index space is the group's *fine shape*: the dimensions of its
first tensor, split further wherever a reshape inside the group needs it (group norm views
[N, C, H, W] as [N, G, C/G*H*W], so the fine shape is [N, G, C/G, H, W]). Every value in the
group is either *full* (one element per fine index) or *kept* (one element per index of the
dimensions that are not reduced). All reductions of a group reduce the same fine dimensions.

Walking the graph in order, a node joins the open group when its inputs from the group line up
with that index space; otherwise the group closes (its kernel is launched there) and a new one
starts. Views join as free re-indexings; everything else (kept torch ops, matmuls on the CPU,
permutes) is a Python step.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .ir import Graph, Node, numel


class PartitionError(Exception):
    pass


@dataclass
class FineDim:
    id: int
    size: int              # at capture time
    base_dim: int          # the dimension of the group's first tensor it is part of
    constant: bool         # False for the one part per base dim whose size is read at run time


@dataclass
class Region:
    """Consecutive fine dims that every operand indexes the same way; one loop in a kernel."""
    ids: list[int]
    reduced: bool
    size: int              # at capture time
    expr: str              # its size at run time, from `shape` (the group's base shape)
    name: str = ""         # loop variable
    size_name: str = ""    # kernel parameter holding its size
    role: str = ""         # "row", "reduce" or "lane"


@dataclass
class Group:
    index: int
    base: tuple[int, ...]
    base_args: list[Node]                       # external tensors whose shapes give `base`
    fdims: list[FineDim] = field(default_factory=list)
    reduced: frozenset[int] | None = None
    members: list[Node] = field(default_factory=list)
    cover: dict = field(default_factory=dict)   # node -> per dim, the fine dim ids it spans
    space: dict = field(default_factory=dict)   # node -> "full" | "kept"
    uses: dict = field(default_factory=dict)    # (node, arg index) -> frozenset of fine ids
    outputs: list[Node] = field(default_factory=list)
    next_id: int = 0
    no_free: set = field(default_factory=set)   # nodes that must not be computed "free"
    scan: Node | None = None                    # the group's running sum, if it has one

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def start(cls, index: int, node: Node, no_free: set) -> "Group":
        if node.op in ("reduce", "scan"):
            first = node.args[0]
            base, base_args = first.shape, [first]
        else:
            base = node.shape
            base_args = [a for a in node.tensor_args()]
        group = cls(index, tuple(base), base_args, no_free=no_free)
        for d, size in enumerate(base):
            if size != 1 or d == 0:
                group.fdims.append(FineDim(group.new_id(), size, d, False))
        if node.op in ("reduce", "scan"):
            group.cover[first] = group.base_cover()
            group.space[first] = "full"
        if not group.try_add(node, external_ok=True):
            raise PartitionError(f"cannot start a kernel at {node.name}")
        if node.op in ("reduce", "scan"):
            group.cover.pop(node.args[0], None)
            group.space.pop(node.args[0], None)
        return group

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def base_cover(self) -> list[list[int]]:
        return [[f.id for f in self.fdims if f.base_dim == d] for d in range(len(self.base))]

    @property
    def member_set(self) -> set:
        return set(self.members)

    def all_ids(self) -> list[int]:
        return [f.id for f in self.fdims]

    def kept_ids(self) -> list[int]:
        return [f.id for f in self.fdims if not self.reduced or f.id not in self.reduced]

    def size_of(self, ids) -> int:
        sizes = {f.id: f.size for f in self.fdims}
        return numel(sizes[i] for i in ids)

    # -- joining --------------------------------------------------------------------------------
    def try_add(self, node: Node, external_ok: bool = False) -> bool:
        saved = self.snapshot()
        try:
            ok = {"pointwise": self.add_pointwise, "reduce": self.add_reduce,
                  "scan": self.add_scan, "host": self.add_view}[node.op](node, external_ok)
        except PartitionError:
            ok = False
        if ok:
            self.members.append(node)
        else:
            self.restore(saved)
        return ok

    def add_pointwise(self, node: Node, external_ok: bool) -> bool:
        inside = [a for a in node.tensor_args() if a in self.cover]
        spaces = {self.space[a] for a in inside}
        whole = numel(node.shape) == self.size_of(self.all_ids())
        if not external_ok and spaces <= {"free"} and not whole:
            # Only inputs from outside (a per-channel scale, say): computed where it is used,
            # at the index it broadcasts to; it must broadcast into the group's first tensor.
            # (One the size of the whole index space is an element value like any other: the
            # second distance of a triplet loss reduces beside the first.)
            space, cover = "free", self.broadcast_cover(node.shape)
            if cover is None or node in self.no_free:
                return False
        else:
            space = "full" if whole else "kept"
            if space == "kept" and numel(node.shape) != self.size_of(self.kept_ids()):
                return False
            ids = self.all_ids() if space == "full" else self.kept_ids()
            cover = self.map_shape(node.shape, ids, split=False)
            if cover is None:
                return False
        for k, arg in enumerate(node.args):
            if not (isinstance(arg, Node) and arg.is_tensor):
                continue
            if arg in self.cover:
                if not self.lines_up(arg, node.shape, cover, space):
                    return False
            else:
                self.uses[(node, k)] = self.pattern(arg.shape, node.shape, cover)
        self.cover[node], self.space[node] = cover, space
        return True

    def broadcast_cover(self, shape: tuple) -> list[list[int]] | None:
        """Cover of a shape that broadcasts into the group's first tensor (right-aligned)."""
        offset = len(self.base) - len(shape)
        if offset < 0:
            return None
        base = self.base_cover()
        if any(len(base[d]) != 1 for d in range(len(self.base)) if base[d]) or \
                len(self.fdims) != sum(len(c) for c in base):
            return None                   # the group has split its dims: keep it simple
        cover = []
        for k, size in enumerate(shape):
            if size == 1:
                cover.append([])
            elif size == self.base[k + offset]:
                cover.append(list(base[k + offset]))
            else:
                return None
        return cover

    def add_scan(self, node: Node, external_ok: bool) -> bool:
        """A running sum along one dim: one per group, with no reductions beside it."""
        x = node.args[0]
        if x not in self.cover or self.space[x] != "full" or self.reduced is not None:
            return False
        ids = [i for d in node.attrs["dims"] for i in self.cover[x][d]]
        if len(ids) != 1:
            return False
        self.reduced, self.scan = frozenset(ids), node
        if x not in self.members:
            self.uses[(node, 0)] = frozenset(self.all_ids())
        self.cover[node], self.space[node] = [list(c) for c in self.cover[x]], "full"
        return True

    def add_reduce(self, node: Node, external_ok: bool) -> bool:
        x = node.args[0]
        if x not in self.cover or self.space[x] != "full" or self.scan is not None:
            return False
        dims = node.attrs["dims"]
        ids = frozenset(i for d in dims for i in self.cover[x][d])
        if not ids or (self.reduced is not None and ids != self.reduced):
            return False
        self.reduced = ids
        if node.attrs["keepdim"]:
            cover = [[] if d in dims else list(c) for d, c in enumerate(self.cover[x])]
        else:
            cover = [list(c) for d, c in enumerate(self.cover[x]) if d not in dims]
        if x not in self.members:            # the group's first node reduces an input
            self.uses[(node, 0)] = frozenset(self.all_ids())
        self.cover[node], self.space[node] = cover, "kept"
        return True

    def add_view(self, node: Node, external_ok: bool) -> bool:
        x = node.args[0] if node.args else None
        if not node.attrs.get("reshape") or x not in self.cover or x not in self.members:
            return False
        if self.space[x] == "free" and node in self.no_free:
            return False
        if self.space[x] == "full":
            cover = self.map_shape(node.shape, self.all_ids(), split=True)
        else:
            cover = self.map_shape(node.shape, self.kept_ids(), split=False)
        if cover is None:
            return False
        self.cover[node], self.space[node] = cover, self.space[x]
        return True

    def lines_up(self, arg: Node, out_shape: tuple, out_cover: list, out_space: str) -> bool:
        """An in-group operand broadcasts only over the reduced dims, and only if it is kept;
        a free operand broadcasts anywhere but, in a kept value, varies only along kept dims."""
        offset = len(out_shape) - len(arg.shape)
        indexed = []
        for k, size in enumerate(arg.shape):
            j = k + offset
            if size == out_shape[j] and size != 1:
                if self.cover[arg][k] != out_cover[j]:
                    return False
                indexed += out_cover[j]
        if self.space[arg] == "free":
            return out_space != "kept" or set(indexed) <= set(self.kept_ids())
        if out_space == "free":
            return False
        needed = self.all_ids() if self.space[arg] == "full" else self.kept_ids()
        sizes = {f.id: f.size for f in self.fdims}
        # a dim of size 1 (a batch of one) is indexed at 0 whether or not it is broadcast
        return sorted(i for i in indexed if sizes[i] != 1) == \
            sorted(i for i in needed if sizes[i] != 1)

    def pattern(self, shape: tuple, out_shape: tuple, out_cover: list) -> frozenset[int]:
        """The fine dims an external operand varies along (it is read at stride 0 elsewhere)."""
        offset = len(out_shape) - len(shape)
        ids = []
        for j, size in enumerate(out_shape):
            k = j - offset
            if k >= 0 and shape[k] == size and size != 1:
                ids += out_cover[j]
        return frozenset(ids)

    def map_shape(self, shape: tuple, ids: list[int], split: bool) -> list[list[int]] | None:
        """Which fine dims each dim of `shape` spans; splits fine dims when allowed."""
        dims = {f.id: f for f in self.fdims}
        queue = [dims[i] for i in ids]
        cover: list[list[int]] = []
        for size in shape:
            run, product = [], 1
            while queue and (product < size or (queue[0].size == 1 and size == 1 and not run)):
                f = queue[0]
                if product * f.size <= size and size % (product * f.size) == 0:
                    run.append(queue.pop(0).id)
                    product *= f.size
                elif split and f.size % (size // product) == 0 and size % product == 0:
                    outer, inner = self.split(f, size // product)
                    queue[0] = inner
                    run.append(outer.id)
                    product *= outer.size
                else:
                    return None
            if product != size:
                return None
            cover.append(run)
        while queue and queue[0].size == 1 and cover:
            cover[-1].append(queue.pop(0).id)
        return None if queue else cover

    def split(self, f: FineDim, outer_size: int) -> tuple[FineDim, FineDim]:
        outer = FineDim(self.new_id(), outer_size, f.base_dim, f.constant)
        inner = FineDim(self.new_id(), f.size // outer_size, f.base_dim, True)
        at = self.fdims.index(f)
        self.fdims[at:at + 1] = [outer, inner]
        swap = lambda ids: [j for i in ids for j in ((outer.id, inner.id) if i == f.id else (i,))]
        for node, cover in self.cover.items():
            self.cover[node] = [swap(c) for c in cover]
        if self.reduced is not None:
            self.reduced = frozenset(swap(self.reduced))
        self.uses = {k: frozenset(swap(v)) for k, v in self.uses.items()}
        return outer, inner

    def snapshot(self):
        return ([FineDim(**vars(f)) for f in self.fdims], self.reduced,
                {k: [list(c) for c in v] for k, v in self.cover.items()}, dict(self.space),
                dict(self.uses), self.next_id, self.scan)

    def restore(self, saved) -> None:
        (self.fdims, self.reduced, self.cover, self.space, self.uses, self.next_id,
         self.scan) = saved

    # -- what the emitters need -------------------------------------------------------------------
    def size_expr(self, f: FineDim) -> str:
        parts = [p for p in self.fdims if p.base_dim == f.base_dim]
        if len(parts) == 1:
            return f"shape[{f.base_dim}]"
        if f.constant:
            return str(f.size)
        others = numel(p.size for p in parts if p is not f)
        return f"shape[{f.base_dim}] // {others}"

    def regions(self) -> list[Region]:
        patterns = set(self.uses.values())
        reduced = self.reduced or frozenset()
        out: list[Region] = []
        for f in self.fdims:
            tag = f.id in reduced
            if out and out[-1].reduced == tag and all(
                    (f.id in p) == (out[-1].ids[-1] in p) for p in patterns):
                out[-1].ids.append(f.id)
                out[-1].size *= f.size
                out[-1].expr += f" * {self.size_expr(f)}"
            else:
                out.append(Region([f.id], tag, f.size, self.size_expr(f)))
        if not out:
            out.append(Region([], False, 1, "1"))
        last_reduced = max((k for k, r in enumerate(out) if r.reduced), default=-1)
        for k, r in enumerate(out):
            r.role = "reduce" if r.reduced else ("lane" if k == len(out) - 1 and
                                                 k > last_reduced else "row")
        name_regions(out)
        return out

    def reductions(self) -> list[Node]:
        return [m for m in self.members if m.op == "reduce"]


def name_regions(regions: list[Region]) -> None:
    rows = [r for r in regions if r.role == "row"]
    reduce = [r for r in regions if r.role == "reduce"]
    lanes = [r for r in regions if r.role == "lane"]
    if not reduce:                              # a pointwise kernel
        if len(regions) == 1:
            names = [("i", "n")]
        elif len(regions) == 2:
            names = [("row", "rows"), ("col", "cols")]
        else:
            names = [(f"i{k}", f"n{k}") for k in range(len(regions))]
        for r, (name, size) in zip(regions, names):
            r.name, r.size_name = name, size
        return
    for group, single, multi in ((rows, ("row", "rows"), "row"), (lanes, ("lane", "lanes"), "lane"),
                                 (reduce, ("col", "cols") if not lanes else ("k", "reduce_size"),
                                  "k")):
        for k, r in enumerate(group):
            r.name, r.size_name = single if len(group) == 1 else (f"{multi}{k}", f"{multi}{k}_size")


@dataclass
class Schedule:
    """The forward pass as Python steps and kernel launches, in order."""
    steps: list[tuple[str, object]]   # ("host" | "matmul" | "template", Node) | ("group", Group)
    groups: list[Group]
    graph: Graph


def partition(graph: Graph) -> Schedule:
    """Partition; a free value that is also needed outside its group is re-done as its own."""
    no_free: set = set()
    while True:
        plan = partition_once(graph, no_free)
        escaped = {m for g in plan.groups for m in g.outputs if g.space[m] == "free"}
        if not escaped:
            return plan
        if escaped <= no_free:
            raise PartitionError("a value computed inside a kernel is needed outside it: " +
                                 ", ".join(sorted(m.name for m in escaped)))
        no_free |= escaped


def partition_once(graph: Graph, no_free: set) -> Schedule:
    steps: list[tuple[str, object]] = []
    groups: list[Group] = []
    open_group: Group | None = None

    def close():
        nonlocal open_group
        if open_group is not None:
            steps.append(("group", open_group))
            groups.append(open_group)
            open_group = None

    for node in graph.nodes:
        if node.op in ("input", "param"):
            continue
        fusable = node.op in ("pointwise", "reduce", "scan") or (node.op == "host" and
                                                          node.attrs.get("reshape"))
        if fusable and open_group is not None and open_group.try_add(node):
            continue
        depends = open_group is not None and any(a in open_group.cover and a in
                                                 open_group.member_set for a in node.node_args())
        if node.op in ("pointwise", "reduce", "scan"):
            close()
            open_group = Group.start(len(groups), node, no_free)
            continue
        if depends:
            close()
        steps.append((node.op if node.op in ("matmul", "template") else "host", node))
    close()
    for group in groups:
        inside = group.member_set
        group.outputs = [m for m in group.members
                         if m in graph.outputs or any(u not in inside for u in m.users)]
    return Schedule(steps, groups, graph)
