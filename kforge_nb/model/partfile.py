"""One group of fx nodes as a KernelBench problem file, and how it plugs back into the model.

The file's `Model` rebuilds the layers the part calls and owns the parameters it reads;
`forward` is torch.fx's own code for the part's subgraph; `get_inputs()` draws tensors of the
real shapes, dtypes and scale (mean and spread of the values seen in the real run). The
`ties` say which of the whole model's weights each of the part's weights is, so the
recomposed model can hand the real ones to the part's kernel.
"""
from __future__ import annotations

import operator
import re
from dataclasses import dataclass, field

import torch
import torch.fx

from .graph import DecomposeError, Group, Info, op_name, recomputed

LAYOUT = {"view", "reshape", "flatten", "unflatten", "permute", "transpose", "t", "contiguous",
          "unsqueeze", "squeeze", "expand", "expand_as", "view_as", "reshape_as", "getitem",
          "narrow", "select", "chunk", "split", "movedim", "identity", "dropout", "clone",
          "float", "to", "type_as"}
FORWARD_GLOBALS = {"torch", "math", "operator", "device", "inf", "nan", "NoneType", "fx_pytree",
                   "pytree", "getattr", "slice"}


@dataclass
class PartSpec:
    """A part as found at one place in the model (an occurrence)."""
    index: int                       # position in the model's forward
    key: str                         # identical parts share it
    label: str                       # "linear -> gelu"
    ops: list[str]
    inputs: list[str]                # fx names of the values it takes (forward args or parts)
    output: str                      # fx name of the value it gives
    where: list[str]                 # the model's module paths it covers
    source: str                      # the problem file
    ties: list[tuple[str, str]] = field(default_factory=list)   # (part's name, model's name)
    glue: bool = False               # only layout ops: nothing for a kernel to do
    locals: list[str] = field(default_factory=list)   # its layers' and weights' names, in order
    # the file's pieces: its Model's __init__ lines, forward and imports (source_with)
    init: list[str] = field(default_factory=list)
    forward: str = ""
    imports: list[str] = field(default_factory=list)

    def source_with(self, inputs: list[Info]) -> str:
        """The part's file with `get_inputs()` drawing inputs like these: the same Model, at
        the shapes the whole model calls it with at another batch size."""
        return problem_source(self.init, self.forward, inputs, self.imports)

    def ties_as(self, other: "PartSpec") -> list[tuple[str, str]]:
        """The ties with this part's own names replaced by the identical `other`'s names."""
        rename = dict(zip(self.locals, other.locals))
        out = []
        for mine, theirs in self.ties:
            head, dot, rest = mine.partition(".")
            out.append((rename.get(head, head) + dot + rest, theirs))
        return out


def build_part(index: int, group: Group, gm: torch.fx.GraphModule, infos: dict,
               rebuild: dict[str, str]) -> PartSpec:
    members = set(group.nodes)
    inputs, inlined = [], []
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    modules = dict(gm.named_modules())

    def need(node):                  # classify a value the part reads
        if node in members or node in inlined or node in inputs or node.op == "get_attr":
            return                   # get_attr: the part owns a copy (Writer.write)
        if not recomputed(node, infos, modules):
            inputs.append(node)
        else:                        # a size, a tuple or a view: recomputed inside the part
            inlined.append(node)
            for arg in node.all_input_nodes:
                need(arg)

    for node in group.nodes:
        for arg in node.all_input_nodes:
            need(arg)
    inputs.sort(key=order.get)
    body = sorted([*inlined, *group.nodes], key=order.get)
    return Writer(gm, infos, rebuild).write(index, inputs, body, group)


class Writer:
    def __init__(self, gm, infos, rebuild):
        self.gm, self.infos, self.rebuild = gm, infos, rebuild
        self.modules = dict(gm.named_modules())

    def write(self, index, inputs, body, group) -> PartSpec:
        graph = torch.fx.Graph()
        env, locals_, init, ties = {}, [], [], []
        signatures = []              # the attributes' shapes: what identical parts share
        names = ["x"] if len(inputs) == 1 else [f"x{i}" for i in range(len(inputs))]
        for node, name in zip(inputs, names):
            env[node] = graph.placeholder(name)

        def local(path: str) -> str:
            base = re.sub(r"\W", "_", path.rsplit(".", 1)[-1])
            base = f"m_{base}" if base[0].isdigit() else base
            name, k = base, 1
            while name in locals_ or name in ("forward", "training"):
                name, k = f"{base}_{k}", k + 1
            locals_.append(name)
            return name

        def lookup(arg):
            if arg not in env and arg.op == "get_attr":
                name = local(arg.target)
                line, signature = self.attribute_line(name, arg.target)
                init.append(line)
                signatures.append(signature)
                ties.append((name, arg.target))
                env[arg] = graph.get_attr(name)
            return env[arg]

        for node in body:
            args = torch.fx.map_arg(node.args, lookup)
            kwargs = torch.fx.map_arg(node.kwargs, lookup)
            target = node.target
            if node.op == "call_module":
                target = local(node.target)
                init.append(f"self.{target} = {self.rebuild[node.target]}")
                ties += [(f"{target}.{k}", f"{node.target}.{k}")
                         for k in self.modules[node.target].state_dict()]
            env[node] = graph.create_node(node.op, target, args, kwargs,
                                          name=target if node.op == "call_module"
                                          else op_name(node, self.modules))
        graph.output(env[group.nodes[-1]])
        forward, imports = self.forward_code(graph)
        # what the part computes: its own nodes, and a layer recomputed in it for the tuple it
        # returns (an LSTM's output is a tuple: the part is the LSTM and the getitem after it)
        members = set(group.nodes)
        ops = [op_name(n, self.modules) for n in body if n in members or n.op == "call_module"]
        shapes = [(self.infos[n].shape, self.infos[n].dtype) for n in inputs]
        layers = [line for line in init if " = nn." in line and "nn.Parameter" not in line]
        # identical parts share a key whatever their layers are called (norm, out_norm)
        key = repr((layers, signatures, forward, shapes))
        for k, name in sorted(enumerate(locals_), key=lambda kv: -len(kv[1])):
            key = re.sub(rf"\b{re.escape(name)}\b", f"@{k}", key)
        label = " -> ".join(ops if len(ops) <= 6 else [*ops[:5], "..."])
        where = sorted({n.target for n in group.nodes if n.op == "call_module"})
        source = problem_source(init, forward, [self.infos[n] for n in inputs], imports)
        return PartSpec(index, key, label, ops, [n.name for n in inputs], group.nodes[-1].name,
                        where, source, ties, glue=all(o in LAYOUT for o in ops),
                        locals=locals_, init=init, forward=forward, imports=imports)

    def attribute_line(self, name: str, target: str) -> tuple[str, tuple]:
        value = operator.attrgetter(target)(self.gm)
        if not isinstance(value, torch.Tensor):
            raise DecomposeError(f"the model reads `self.{target}`, a "
                                 f"{type(value).__name__}, where a tensor was expected")
        drawn = draw(Info.of(value), value)
        signature = (name, tuple(value.shape), str(value.dtype))
        if isinstance(value, torch.nn.Parameter):
            grad = "" if value.requires_grad else ", requires_grad=False"
            return f"self.{name} = nn.Parameter({drawn}{grad})", signature
        return f"self.register_buffer({name!r}, {drawn})", signature

    @staticmethod
    def forward_code(graph: torch.fx.Graph) -> tuple[str, list[str]]:
        """torch.fx's source for the subgraph, and the imports it needs (math.sqrt of a size
        reads `math_sqrt(...)` there)."""
        code = graph.python_code(root_module="self")
        text, imports, unknown = code.src, [], []
        for name, value in code.globals.items():
            if name in FORWARD_GLOBALS or not re.search(rf"\b{re.escape(name)}\b", text):
                continue
            module = {"_operator": "operator"}.get(getattr(value, "__module__", ""),
                                                   getattr(value, "__module__", ""))
            if module in ("math", "operator", "builtins") or module.startswith("torch"):
                leaf = getattr(value, "__name__", name)
                imports.append(f"from {module} import {leaf}" +
                               (f" as {name}" if leaf != name else ""))
            else:
                unknown.append(name)
        if unknown:
            raise DecomposeError(
                f"the model calls {', '.join(sorted(unknown))}, which a part file cannot import "
                "(a function of your own called in forward?); write it with torch ops, or "
                "optimise the modules one at a time with `kforge run`")
        text = public_spellings(text)
        lines = []
        for line in text.strip("\n").splitlines():
            line = re.sub(r";\s+(\w+\s*=\s*)+None\s*$", "", line.rstrip())
            if re.fullmatch(r"\s+(\w+\s*=\s*)+None", line):
                continue                      # fx frees values early; a reader needs not see it
            lines.append(line)
        return "\n".join(lines), imports


# torch.fx names a builtin by the module it lives in: F.gelu is written `torch._C._nn.gelu`,
# torch.special.erf `torch._C._special.special_erf`. A part's file (and the recomposed model
# that keeps it) is read by people and judged by the guardrails: write the public name.
PRIVATE_HOMES = {"_nn": ("torch.nn.functional", ""), "_special": ("torch.special", "special_"),
                 "_linalg": ("torch.linalg", "linalg_"), "_fft": ("torch.fft", "fft_")}


def public_spellings(text: str) -> str:
    """`torch._C._nn.gelu(` -> `torch.nn.functional.gelu(` wherever the public function is the
    very same object; any other spelling is left as fx wrote it."""
    import importlib

    def public(match: re.Match) -> str:
        home, name = match.group(1), match.group(2)
        module, prefix = PRIVATE_HOMES[home]
        private = getattr(getattr(torch._C, home, None), name, None)
        short = name[len(prefix):] if name.startswith(prefix) else name
        try:
            target = importlib.import_module(module)
        except ImportError:
            return match.group(0)
        for candidate in (short, name):
            if private is not None and getattr(target, candidate, None) is private:
                return f"{module}.{candidate}"
        return match.group(0)

    return re.sub(r"\btorch\._C\.(_nn|_special|_linalg|_fft)\.(\w+)\b", public, text)


def sig(x: float) -> str:
    """A float in 4 significant digits, as a float literal (`1.0`, not `1`: torch.full would
    make an integer tensor of it)."""
    if x != x or abs(x) == float("inf"):
        return "0.0"
    return repr(float(f"{x:.4g}"))


def draw(info: Info, exact: torch.Tensor | None = None) -> str:
    """Source for a tensor like the one described: the exact values when small, a causal mask
    as a causal mask, other two-valued tensors (masks) with the same density, else random
    values of the same mean and spread (integers: the same range)."""
    shape = ", ".join(str(s) for s in info.shape)
    shape_arg = f"({shape},)" if len(info.shape) == 1 else f"({shape})"
    dtype = "" if info.dtype == "float32" else f", dtype=torch.{info.dtype}"
    if exact is not None and exact.numel() <= 16:
        values = exact.detach().cpu().reshape(-1).tolist()
        return f"torch.tensor({values!r}{dtype}).reshape({shape_arg})"
    if exact is not None and exact.dim() >= 2 and exact.numel():
        mask = two_valued(exact, shape_arg, dtype)
        if mask:
            return mask
    if info.dtype == "bool":
        return f"torch.rand({shape_arg}) < 0.5"
    if info.dtype.startswith(("int", "uint")):
        return f"torch.randint({int(info.low)}, {int(info.high) + 1}, {shape_arg}{dtype})"
    if not info.std:
        return f"torch.full({shape_arg}, {sig(info.mean)}{dtype})"
    mean = info.mean if abs(info.mean) > 1e-3 * info.std else 0.0
    shift = f" {'-' if mean < 0 else '+'} {sig(abs(mean))}" if mean else ""
    return f"torch.randn({shape_arg}{dtype}) * {sig(info.std)}{shift}"


def two_valued(t: torch.Tensor, shape_arg: str, dtype: str) -> str | None:
    """A mask's source: `torch.tril(torch.ones(...))` for a causal mask (the pattern decides
    which scores survive, so random values would not do), else one of the same density."""
    values = torch.unique(t.detach())
    if values.numel() != 2 or t.dtype == torch.bool:
        return None
    low, high = values.tolist()
    ones = torch.ones_like(t, dtype=torch.float32)
    for fn in ("tril", "triu"):
        pattern = getattr(torch, fn)(ones)
        if torch.equal(t.float(), pattern * (high - low) + low):
            scaled = f" * {high - low!r} + {low!r}" if (low, high) != (0, 1) else ""
            return f"torch.{fn}(torch.ones({shape_arg}{dtype})){scaled}"
    density = (t == high).float().mean().item()
    cast = f".to(torch.{str(t.dtype).replace('torch.', '')})" if dtype else ""
    return f"torch.where(torch.rand({shape_arg}) < {sig(density)}, {high!r}, {low!r}){cast}"


def problem_source(init: list[str], forward: str, inputs: list[Info],
                   extra_imports: list[str]) -> str:
    """The file's code; decompose_main.py puts the docstring (part number, uses) on top."""
    body = "\n".join(f"        {line}" for line in init) or "        pass"
    forward = "\n".join(f"    {line}" if line else line for line in forward.splitlines())
    drawn = ",\n        ".join(draw(i) for i in inputs)
    imports = ["import math", "import torch", "import torch.nn as nn", *sorted(extra_imports)]
    if re.search(r"\b(inf|nan)\b", forward):
        imports.append("from math import inf, nan")
    if re.search(r"\bdevice\(", forward):
        imports.append("from torch import device")
    return f'''{chr(10).join(imports)}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{body}

{forward}


def get_inputs():
    return [
        {drawn},
    ]


def get_init_inputs():
    return []
'''
