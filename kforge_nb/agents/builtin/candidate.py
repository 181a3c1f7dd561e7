"""Assemble a complete candidate file: docstring, imports, kernels, launchers, ModelNew.

ModelNew keeps the reference's constructor verbatim (same arguments, same submodules and
parameters), so the evaluator copies the reference's weights into it; only forward changes.

The file's `# kforge-builtin:` header line is the generator's record of what it wrote: the
target, the knobs (`options`, which an "optimise" request starts from), the facts of the code
(`CodeFacts`: what the kernel writers know of the text they emit, which the analyst reads
instead of the text) and the sha256 of the file without that line, which says whether the
facts still describe the code below them.
"""
from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
from dataclasses import dataclass, field

from .capture.ir import HALF, Node
from .capture.partition import Group, Schedule
from ...pyparse import parse_ast

HEADER_MARK = "# kforge-builtin:"


REFERENCE_HARNESS = ("Model", "get_inputs", "get_init_inputs")


def bound_names(target: ast.expr) -> list[str]:
    """The names an assignment target binds: `A`, `A, B = ...`, `(A, *rest) = ...`."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Starred):
        return bound_names(target.value)
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in bound_names(element)]
    return []                                   # `a.b = ...`, `a[i] = ...` bind no name


def top_level_bindings(tree: ast.Module) -> dict[str, list[ast.stmt]]:
    """Each name the module binds at top level (functions, classes, assignments) and the
    statements that bind it, in file order: `HIDDEN = 64` then `HIDDEN *= 2` are both kept."""
    bindings: dict[str, list[ast.stmt]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [n for t in node.targets for n in bound_names(t)]
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            names = bound_names(node.target)
        else:
            names = []
        for name in names:
            if name not in REFERENCE_HARNESS:
                bindings.setdefault(name, []).append(node)
    return bindings


def statements_needed(root: ast.AST, bindings: dict[str, list[ast.stmt]]) -> set[ast.stmt]:
    """The top-level statements `root` reads a name from, and those they read, transitively."""
    needed: set[ast.stmt] = set()
    todo = [root]
    while todo:
        for node in ast.walk(todo.pop()):
            if isinstance(node, ast.Name):
                fresh = [s for s in bindings.get(node.id, []) if s not in needed]
                needed.update(fresh)
                todo += fresh
    return needed


def reference_parts(source: str) -> tuple[list[str], str | None]:
    """(top-level code the constructor needs, the constructor's source) from the reference.

    Only parsed, never run: the imports, then the functions, classes and module-level
    constants (`VOCAB, DIM = 4096, 64`) the constructor reads, in the reference's order."""
    tree = parse_ast(source)
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    init = next((n for n in model.body if isinstance(n, ast.FunctionDef) and
                 n.name == "__init__"), None) if model else None
    needed = statements_needed(init, top_level_bindings(tree)) if init else set()
    imports = [ast.get_source_segment(source, n) for n in tree.body
               if isinstance(n, (ast.Import, ast.ImportFrom))]
    support = [ast.get_source_segment(source, n) for n in tree.body if n in needed]
    init_text = None
    if init is not None:
        lines = source.splitlines()
        start = min([d.lineno for d in init.decorator_list] + [init.lineno]) - 1
        body = lines[start:init.end_lineno]
        indent = len(body[0]) - len(body[0].lstrip())
        init_text = "\n".join("    " + l[indent:] if l.strip() else "" for l in body)
        init_text = init_text.replace("super(Model, self)", "super(ModelNew, self)")
    return [i for i in imports if i] + support, init_text


def python_ref(node, params_as_self: bool = True) -> str:
    if not isinstance(node, Node):
        return repr(node)
    if node.op == "param" and params_as_self:
        return node.attrs["expr"]
    return node.name


MATMUL_CALLS = {"linear": "F.linear", "mm": "torch.mm", "bmm": "torch.bmm",
                "matmul": "torch.matmul"}


def kept_product(item: Node) -> str | None:
    """The matrix product a kept torch call computes (one the capture could not lower: it runs
    on the vendor's GEMM), by its MATMUL_CALLS name; None for any other kept call."""
    called = item.attrs["expr"].partition("(")[0]
    return next((fn for fn, call in MATMUL_CALLS.items() if call == called), None)


def vendor_matmul(node: Node) -> list[str]:
    call = f"{MATMUL_CALLS[node.fn]}({', '.join(python_ref(a) for a in node.args)})"
    return [f"{node.name} = {call}  # kept in torch: the vendor GEMM (cuBLAS, oneDNN)"]


def forward_lines(plan: Schedule, launches: dict, product) -> list[str]:
    """Body of ModelNew.forward: Python steps, kernel launches and the return.

    `launches[group index]` is (launcher name, argument nodes, output nodes); `product(node)`
    gives the lines for a matrix product or a template op (a kept vendor call, or a launch)."""
    lines = []
    for kind, item in plan.steps:
        if kind == "host":
            expr = item.attrs["expr"].format(*[python_ref(a) for a in item.args])
            comment = ""
            if item.fn == "kept":
                comment = f"  # kept in torch: {item.attrs.get('label') or expr}"
            lines.append(f"{item.name} = {expr}{comment}")
        elif kind in ("matmul", "template"):
            lines += product(item)
        elif item.index in launches:
            launcher, args, outputs = launches[item.index]
            call = f"{launcher}({', '.join(python_ref(a) for a in args)})"
            lines.append(f"{', '.join(o.name for o in outputs)} = {call}")
    outs = [python_ref(o) for o in plan.graph.outputs]
    if plan.graph.returns_tuple:
        lines.append(f"return {', '.join(outs)}" + ("," if len(outs) == 1 else ""))
    else:
        lines.append(f"return {outs[0]}")
    return lines


def output_shape(group: Group, node: Node) -> str:
    cover = group.cover[node]
    if tuple(node.shape) == tuple(group.base) and cover == group.base_cover():
        return "shape"
    fine = {f.id: f for f in group.fdims}
    dims = [" * ".join(group.size_expr(fine[i]) for i in ids) if ids else "1" for ids in cover]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def base_shape(group: Group) -> str:
    same = [a for a in group.base_args if tuple(a.shape) == tuple(group.base)]
    if same:
        return f"{same[0].name}.shape"
    return f"torch.broadcast_shapes({', '.join(a.name + '.shape' for a in group.base_args)})"


def docstring(title: str, lines: list[str]) -> str:
    return '"""' + title + "\n\n" + "\n".join(lines) + '\n"""'


@dataclass
class CodeFacts:
    """What the generator knows of the code it wrote, recorded where each construct is emitted
    (the kernel writers, the assembly) and carried in the header for the analyst, which reads
    these instead of the text. Empty (all false) is what code without a trusted header has."""

    # per fused kernel that reduces: the elements each reduction covers, at the captured sizes
    reductions: list[int] = field(default_factory=list)
    # the matrix products forward leaves to torch's GEMM: "linear", "mm", "bmm", "matmul"
    vendor_gemm: list[str] = field(default_factory=list)
    # C++: maths functions called from libm, one element at a time (GCC vectorises no libm
    # call), that cpp/maths.py has a vectorisable helper for
    scalar_math: set[str] = field(default_factory=set)
    # C++: cpp/maths.py's vectorisable helpers the kernels call ("exp" for vexp)
    vector_math: set[str] = field(default_factory=set)
    lane_block: bool = False           # C++: a kernel gives each task a block of LANE_BLOCK lanes
    task_loop: bool = False            # C++: a kernel splits its rows into tasks over the threads
    double_accumulator: bool = False   # C++: a reduction or a running sum accumulates in double
    openmp: bool = False               # C++: a kernel runs a loop on the OpenMP thread team
    parked_output: bool = False        # C++: a pass parks a value in the output, read back later
    # Triton: a product's tiles multiplied as tl.sum of broadcast products (exact fp32), not
    # with tl.dot
    triton_dot_by_sum: bool = False

    def add(self, other: "CodeFacts") -> None:
        """Take in another writer's facts: lists and sets joined, flags or-ed."""
        for f in dataclasses.fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if isinstance(mine, list):
                mine.extend(theirs)
            elif isinstance(mine, set):
                mine |= theirs
            else:
                setattr(self, f.name, mine or theirs)

    def as_json(self) -> dict:
        """The facts that hold (one left out is false or empty)."""
        return {f.name: sorted(v) if isinstance(v, set) else v for f in dataclasses.fields(self)
                if (v := getattr(self, f.name))}

    @classmethod
    def from_json(cls, data) -> "CodeFacts":
        """The facts a header states, each of the type it must have (the header is part of a
        candidate's text: anything else is left out, as if not stated)."""
        data = data if isinstance(data, dict) else {}
        facts = cls()
        for f in dataclasses.fields(cls):
            value, default = data.get(f.name), getattr(facts, f.name)
            if isinstance(default, bool):
                setattr(facts, f.name, value is True)
            elif isinstance(value, list):
                kind = int if f.name == "reductions" else str     # the one list of numbers
                items = [v for v in value if isinstance(v, kind) and not isinstance(v, bool)]
                setattr(facts, f.name, type(default)(items))
        return facts


def kernel_text(code: str) -> str:
    """A candidate without its header line: what tells two candidates' kernels apart, and
    what the header's digest is of."""
    return "\n".join(line for line in code.splitlines() if not line.startswith(HEADER_MARK))


def code_digest(code: str) -> str:
    return hashlib.sha256(kernel_text(code).encode()).hexdigest()


def stamped(code: str, target: str, options: dict, facts: CodeFacts) -> str:
    """`code` with its bare HEADER_MARK line (where the header goes) replaced by the header:
    the target, the knobs, the facts and the digest of the rest."""
    header = f"{HEADER_MARK} " + json.dumps({"target": target, "options": options,
                                             "facts": facts.as_json(),
                                             "code_sha256": code_digest(code)}, sort_keys=True)
    lines = code.split("\n")
    lines[lines.index(HEADER_MARK)] = header
    return "\n".join(lines)


def facts_of(code: str | None) -> CodeFacts:
    """The facts the header states, where the code is still the one they were recorded for;
    none for code without a header (an LLM's) or changed since (a person's edit, an LLM's
    rewrite that kept the line)."""
    header = read_header(code)
    if not code or header.get("code_sha256") != code_digest(code):
        return CodeFacts()
    return CodeFacts.from_json(header.get("facts"))


def read_header(code: str | None) -> dict:
    for line in (code or "").splitlines():
        if line.startswith(HEADER_MARK):
            try:
                header = json.loads(line[len(HEADER_MARK):])
            except ValueError:
                return {}
            return header if isinstance(header, dict) else {}
    return {}


def model_class(init_text: str | None, forward_args: list[str], body: list[str]) -> str:
    lines = ["class ModelNew(nn.Module):"]
    if init_text:
        lines += [init_text, ""]
    lines.append(f"    def forward(self{''.join(', ' + a for a in forward_args)}):")
    lines += ["        " + l for l in body]
    return "\n".join(lines)


def launcher_prologue(kp, launcher: str, verb: str) -> list[str]:
    """The start of a kernel's Python wrapper, the same for every target: signature, contiguous
    inputs, the size of each region (`kp.regions`' size names) and the outputs allocated."""
    args = [n.name for n in kp.inputs] + [s.name for s in kp.scalars]
    lines = [f"def {launcher}({', '.join(args)}):",
             f'    """{verb} {kp.name}: {kp.story()[0].lower().rstrip(".")}."""']
    lines += [f"    {n.name} = {n.name}.contiguous()" for n in kp.inputs]
    lines.append(f"    shape = {base_shape(kp.group)}")
    lines.append(f"    {', '.join(r.size_name for r in kp.regions)} = "
                 f"{', '.join(r.expr for r in kp.regions)}")
    device = kp.inputs[0].name + ".device" if kp.inputs else "'cpu'"
    lines += [f"    {o.name} = torch.empty({output_shape(kp.group, o)}, "
              f"dtype={dtype_expr(o, kp.inputs)}, device={device})" for o in kp.outputs]
    return lines


def dtype_expr(node: Node, inputs: list[Node]) -> str:
    """A bf16 / fp16 output's dtype as an input's that has it (`x.dtype`), the way the
    reference spelt it (`.bfloat16()`, `cache.dtype`): a literal low precision in the candidate
    reads as a precision switch to the judge's rules. Any other dtype as it is."""
    same = next((n for n in inputs if n.dtype == node.dtype), None)
    return f"{same.name}.dtype" if same is not None and node.dtype in HALF else str(node.dtype)
