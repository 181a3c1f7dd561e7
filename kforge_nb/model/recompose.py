"""One standalone `ModelNew` file for the whole model, from the kernels of its parts.

    the original problem source          (its Model owns the weights, under their own names)
    each part's code, names prefixed     (a verified kernel, or the part's reference code)
    class ModelNew(Model)                (forward calls the parts in the model's order)

`ModelNew` inherits the model's `__init__`, so its state dict is the model's: the evaluator
copies the reference's weights into it as into any candidate. The parts are kept outside the
module tree (a tuple), and each part's weights are *the same tensors* as the model's (tied
again after every `.to()`), so the weights loaded into ModelNew are the weights the kernels
read. Each part's code keeps its own namespace by a prefix on its top-level names (two
kernels may both call their kernel `fused_kernel`); comments and layout are kept.
This module writes text only: nothing it writes runs in this process.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass

from ..guardrails import CANDIDATE_CLASSES
from ..pyparse import parse_ast


@dataclass
class PartCode:
    """The code a part runs in the recomposed model."""
    part: int
    source: str
    kernel: bool                 # False: the part's own reference code
    origin: str                  # where it comes from, for the header comment


def defined_names(tree: ast.Module) -> set[str]:
    """Top-level names a file defines itself (imports are shared, not renamed)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def prefixed(source: str, prefix: str) -> str:
    """`source` with each of its own top-level names `n` renamed `{prefix}n` wherever the name
    is used as a name (not as an attribute, a keyword argument or inside a string)."""
    names = defined_names(parse_ast(source))
    lines = source.splitlines(keepends=True)
    edits = []
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline)
              if t.type not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT,
                                tokenize.DEDENT, tokenize.NEWLINE)]
    depth = 0
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        if tok.type != tokenize.NAME or tok.string not in names:
            continue
        before = tokens[i - 1].string if i else ""
        after = tokens[i + 1].string if i + 1 < len(tokens) else ""
        if before == ".":
            continue                                    # an attribute
        if depth and after == "=" and before in ("(", ","):
            continue                                    # a keyword argument
        edits.append(tok.start)
    for row, col in sorted(edits, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + prefix + line[col:]
    return "".join(lines)


def candidate_class(source: str) -> str:
    tree = parse_ast(source)
    return next((n.name for n in tree.body if isinstance(n, ast.ClassDef)
                 and n.name in CANDIDATE_CLASSES), "ModelNew")


FUTURE = re.compile(r"^from __future__ import [^\n]*\n", re.MULTILINE)


def recompose(model_source: str, name: str, decomposition: dict, codes: list[PartCode]) -> str:
    """The recomposed file's text."""
    by_part = {c.part: c for c in codes}
    sources = [model_source] + [c.source for c in codes]
    future = any(FUTURE.search(s) for s in sources)
    out = ["from __future__ import annotations\n"] if future else []
    out.append(header(name, decomposition, by_part))
    out.append(banner("the model as written (its __init__ makes the weights)"))
    out.append(FUTURE.sub("", model_source).rstrip() + "\n")
    classes = {}
    for code in sorted(codes, key=lambda c: c.part):
        prefix = f"_kf{code.part}_"
        what = "kernel" if code.kernel else "reference code (not optimised)"
        label = decomposition["parts"][code.part]["label"]
        out.append(banner(f"part {code.part}: {label}: {what}, from {code.origin}"))
        out.append(prefixed(FUTURE.sub("", code.source), prefix).rstrip() + "\n")
        classes[code.part] = prefix + (candidate_class(code.source) if code.kernel else "Model")
    out.append(banner("the recomposition"))
    out.append(recomposition(decomposition, classes))
    return "\n\n".join(out).rstrip() + "\n"


def header(name: str, decomposition: dict, by_part: dict) -> str:
    rows = []
    for part in decomposition["parts"]:
        code = by_part[part["id"]]
        what = "kernel" if code.kernel else "reference code"
        rows.append(f"  part {part['id']:<3} {part['label'][:40]:<40} x{part['occurrences']:<3} "
                    f"{what}")
    return (f'"""{name}, recomposed by `kforge model`: its forward calls each part\'s code in '
            'the model\'s order.\n\n' + "\n".join(rows) + '\n"""')


def banner(text: str) -> str:
    return f"# {'-' * 4} {text} {'-' * max(4, 94 - len(text))}"


def forward_lines(decomposition: dict) -> list[str]:
    """The forward's body: a call per part, and each value dropped after its last use (as
    eager code frees it: kept to the end, every activation would stay allocated)."""
    steps, returned = decomposition["steps"], set(re.findall(r"\w+", decomposition["output"]))
    last = {}
    for k, step in enumerate(steps):
        for name in step["inputs"]:
            last[name] = k
    lines = []
    for k, step in enumerate(steps):
        lines.append(f"        {step['output']} = parts[{k}]({', '.join(step['inputs'])})")
        done = [n for n in dict.fromkeys(step["inputs"]) if last[n] == k and n not in returned]
        if done:
            lines.append(f"        del {', '.join(done)}")
    return lines


def recomposition(decomposition: dict, classes: dict[int, str]) -> str:
    steps = decomposition["steps"]
    table = ",\n    ".join(f"({classes[s['part']]}, {[tuple(t) for t in s['ties']]!r})"
                           for s in steps)
    calls = "\n".join(forward_lines(decomposition))
    args = ", ".join(["self", *decomposition["args"]])
    return f'''# each call of a part in forward: (its class, [(its weight, the model's weight), ...])
_KFORGE_STEPS = [
    {table},
]


def _kforge_tensor(model, path):
    for name in path.split("."):
        model = getattr(model, name)
    return model


class ModelNew(Model):
    """The model's own __init__ (the same weights, under the same names); a forward that
    calls the parts' code. The parts live outside the module tree and read the model's
    tensors themselves."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._kforge_parts = tuple(cls() for cls, _ in _KFORGE_STEPS)
        self._kforge_tie()

    def _kforge_tie(self):
        for part, (_, ties) in zip(self._kforge_parts, _KFORGE_STEPS):
            for mine, theirs in ties:
                owner_path, _, leaf = mine.rpartition(".")
                owner = part.get_submodule(owner_path) if owner_path else part
                if leaf not in owner._parameters and leaf not in owner._buffers:
                    raise AttributeError(
                        f"{{type(part).__name__}} has no weight {{mine!r}} to take the model's "
                        f"{{theirs!r}}: a part's kernel must name its weights as the part's Model")
                table = owner._parameters if leaf in owner._parameters else owner._buffers
                table[leaf] = _kforge_tensor(self, theirs)

    def _apply(self, fn, *args, **kwargs):
        super()._apply(fn, *args, **kwargs)
        parts = getattr(self, "_kforge_parts", ())
        for part in parts:
            part._apply(fn, *args, **kwargs)
        if parts:
            self._kforge_tie()     # moved tensors may be new objects: share them again
        return self

    def train(self, mode=True):
        super().train(mode)
        for part in getattr(self, "_kforge_parts", ()):
            part.train(mode)
        return self

    def forward({args}):
        parts = self._kforge_parts
{calls}
        return {decomposition["output"]}
'''
