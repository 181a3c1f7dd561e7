"""What a name in the candidate stands for: its imports and aliases followed to the object.

A rule that reads spellings is blind to `from torch._C import _DisableTorchDispatch`,
`C = torch._C` or `run = exec`. `Bindings` follows every import (`import a.b as c`,
`from a import b as c`), every plain alias (`x = torch._C`, `run = exec`) and every name
the candidate binds itself (a `def`, a `class`, an assignment: it hides a builtin of the same
name), across the whole file, so `resolve(node)` gives the full names an expression may stand
for: `C._DisableTorchDispatch()` -> {"torch._C._DisableTorchDispatch"}. Scopes are merged
(a name bound two ways anywhere stands for both): a rule that fires on any of them errs on the
side of reading too much, never too little. A name no binding explains stands for itself
(`eval`, `print`: the builtins). A lookup by a string (`getattr(torch, "_C")`) is not
followed: that is the run-time audit's to judge, by what runs.
"""
from __future__ import annotations

import ast

LOCAL = "<candidate>"     # what a name the candidate binds to a value of its own stands for


class Bindings:
    def __init__(self, tree: ast.AST):
        self.names: dict[str, set[str]] = {}
        aliases: list[tuple[str, ast.AST]] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self._bind(a.asname or a.name.split(".")[0],
                               a.name if a.asname else a.name.split(".")[0])
            elif isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                for a in node.names:
                    self._bind(a.asname or a.name, f"{module}.{a.name}".lstrip("."))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self._bind(node.name, f"{LOCAL}.{node.name}")
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    aliases += _pairs(target, node.value)
                    for name in ast.walk(target):     # a value of its own, at least
                        if isinstance(name, ast.Name):
                            self._bind(name.id, f"{LOCAL}.{name.id}")
        for _ in range(8):                     # aliases of aliases, to a fixed point
            grown = False
            for name, value in aliases:
                for full in self.resolve(value):
                    grown |= self._bind(name, full)
            if not grown:
                break

    def _bind(self, name: str, full: str) -> bool:
        known = self.names.setdefault(name, set())
        if full in known or len(known) > 16:
            return False
        known.add(full)
        return True

    def resolve(self, node: ast.AST) -> set[str]:
        """The full dotted names `node` may stand for; empty when it is not a name at all
        (a call's result, a subscript of data, a literal)."""
        if isinstance(node, ast.Name):
            return self.names.get(node.id) or {node.id}
        if isinstance(node, ast.Attribute):
            return {f"{base}.{node.attr}" for base in self.resolve(node.value)}
        return set()

    def uses(self, tree: ast.AST):
        """(node, full names) for every name read in the code, each chain whole: the
        `torch._C._nn.gelu` of a call, not also its `torch._C._nn` and `torch._C` (a rule
        says each use once)."""
        inner = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                inner.add(id(node.value))
        for node in ast.walk(tree):
            if id(node) in inner or isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del)):
                continue
            if isinstance(node, (ast.Name, ast.Attribute)):
                yield node, self.resolve(node)


def _pairs(target: ast.AST, value: ast.AST) -> list[tuple[str, ast.AST]]:
    """(name, value) for `name = value`, element by element for `a, b = x, y`."""
    if isinstance(target, ast.Name):
        return [(target.id, value)]
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
            and len(target.elts) == len(value.elts):
        return [p for t, v in zip(target.elts, value.elts) for p in _pairs(t, v)]
    return []


def _is_str(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)



def imports(tree: ast.AST) -> list[tuple[int, str, bool]]:
    """(line, full name, from?) for every name an import binds: `import a.b` -> "a.b",
    `from a import b` -> "a.b" (from? True: b may be a module's member, not a module)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, False) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            out += [(node.lineno, f"{module}.{a.name}".lstrip("."), True) for a in node.names]
    return out
