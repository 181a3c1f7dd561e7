"""Static guardrails: rules read off a candidate's source before any of it runs.

A rule has a name (what a verdict lists), a one-line reason, and a check that returns the
places it fired. Targets add their required patterns; users add bans and requirements of
their own (`--ban REGEX`, `--require REGEX`) and allow torch ops they want kept (`--allow`).
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Callable

CANDIDATE_CLASSES = ("ModelNew", "NewModel")


@dataclass(frozen=True)
class Rule:
    name: str
    reason: str
    check: Callable[["Source"], list[str]]   # returns where it fired; empty = passed


@dataclass
class Source:
    """A candidate's text and syntax tree, with the lookups rules share."""
    text: str
    tree: ast.Module
    allowed_ops: frozenset[str] = frozenset()
    precision: str = "strict"
    reference: str = ""        # the problem's source: dtypes it already uses are not switches

    def strings(self) -> list[str]:
        return [n.value for n in ast.walk(self.tree)
                if isinstance(n, ast.Constant) and isinstance(n.value, str)]

    def candidate_class(self) -> ast.ClassDef | None:
        return next((n for n in self.tree.body
                     if isinstance(n, ast.ClassDef) and n.name in CANDIDATE_CLASSES), None)

    def forward_and_helpers(self) -> list[ast.AST]:
        """ModelNew.forward plus the module-level functions it reaches by name."""
        cls = self.candidate_class()
        if cls is None:
            return []
        functions = {n.name: n for n in self.tree.body if isinstance(n, ast.FunctionDef)
                     and not is_triton_jit(n)}
        todo = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"]
        seen: list[ast.AST] = []
        while todo:
            fn = todo.pop()
            if fn in seen:
                continue
            seen.append(fn)
            for call in (c for c in ast.walk(fn) if isinstance(c, ast.Call)):
                if isinstance(call.func, ast.Name) and call.func.id in functions:
                    todo.append(functions[call.func.id])
        return seen


def dotted(node: ast.AST) -> str:
    """`torch.nn.functional.relu` for the expression naming it, '' if not a plain name chain."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def is_triton_jit(fn: ast.FunctionDef) -> bool:
    return any(dotted(d.func if isinstance(d, ast.Call) else d).split(".")[-1] in ("jit", "autotune")
               for d in fn.decorator_list)


# --- default bans -------------------------------------------------------------------------------

# Torch functions that compute: called by name in forward they are the answer, not a kernel.
COMPUTE_METHODS = {
    "sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin", "softmax", "log_softmax",
    "exp", "log", "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "relu", "sigmoid", "tanh",
    "add", "sub", "mul", "div", "pow", "sqrt", "rsqrt", "norm", "var", "std", "clamp", "clip",
    "abs", "neg", "logsumexp", "cumsum", "prod", "gelu", "silu", "conv1d", "conv2d", "conv3d",
    "linear", "layer_norm", "group_norm", "batch_norm", "erf", "sin", "cos", "where", "maximum",
    "minimum", "dot", "outer", "addcmul", "lerp", "sort", "topk", "masked_fill", "softplus",
    "add_", "mul_", "div_", "sub_", "clamp_", "relu_", "exp_", "copy_",
}


TORCH_NAMESPACES = ("torch", "torch.nn.functional", "F", "nn.functional", "torch.special",
                    "torch.linalg", "torch.fft", "np", "numpy")


def torch_compute_in_forward(src: Source) -> list[str]:
    """A fast first pass: a torch (or NumPy) compute function called by its own name in
    forward. It errs on the side of letting a candidate through: attributes, helper objects
    and submodules are judged at run time by what they dispatch (evaluator/audit.py), so a
    helper called `self.softmax` or a shader compiled in forward is never rejected here."""
    if "*" in src.allowed_ops:
        return []
    found = []
    for fn in src.forward_and_helpers():
        for node in ast.walk(fn):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                found.append(f"line {node.lineno}: `@` matrix product")
            if not isinstance(node, ast.Call):
                continue
            name = dotted(node.func)
            namespace, _, leaf = name.rpartition(".")
            if namespace in TORCH_NAMESPACES and leaf in COMPUTE_METHODS \
                    and name not in src.allowed_ops and leaf not in src.allowed_ops:
                found.append(f"line {node.lineno}: {name}()")
    return found


def precision_switch(src: Source) -> list[str]:
    if src.precision != "strict":
        return []
    # Lowering precision is banned; asking for full precision (allow_tf32 = False,
    # input_precision="ieee") is not.
    pattern = (r"allow_tf32\s*=\s*True|set_float32_matmul_precision\(\s*['\"](high|medium)|"
               r"autocast|\.half\(\)|\.bfloat16\(\)|torch\.(float16|half|bfloat16)|"
               r"tl\.(float16|bfloat16)|input_precision\s*=\s*['\"](?!ieee)|allow_fp16")
    return [f"line {i}: {m.group(0)}" for i, line in enumerate(src.text.splitlines(), 1)
            for m in [re.search(pattern, line)] if m and m.group(0) not in src.reference]


def fast_math(src: Source) -> list[str]:
    pattern = r"fast[-_]math|-Ofast|#\s*pragma\s+GCC\s+optimize|__fmul_rn|fast::"
    return [f"line {i}: {m.group(0)}" for i, line in enumerate(src.text.splitlines(), 1)
            for m in [re.search(pattern, line)] if m]


def swallowed_exception(src: Source) -> list[str]:
    found = []
    for node in ast.walk(src.tree):
        if isinstance(node, ast.ExceptHandler):
            broad = node.type is None or dotted(node.type) in ("Exception", "BaseException")
            trivial = all(isinstance(s, (ast.Pass, ast.Return, ast.Continue)) or
                          (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
                          for s in node.body)
            if broad and trivial:
                found.append(f"line {node.lineno}: broad `except` that discards the error")
    return found


# Rewriting code objects or asking which dispatch mode is active: ways to hide from the audit.
INTERPRETER_INTERNALS = {"__code__", "co_filename", "f_back", "_python_dispatch",
                         "_get_current_dispatch_mode", "_len_torch_dispatch_stack",
                         "_get_dispatch_mode", "_get_torch_dispatch_mode",
                         "_is_torch_function_mode_enabled", "_DisableTorchDispatch",
                         "_DisablePythonDispatcher", "_ExcludeDispatchKeyGuard",
                         "_unset_dispatch_mode", "_pop_torch_dispatch_stack",
                         "_set_dispatch_mode", "_DisableTorchFunction",
                         "_DisableTorchFunctionSubclass", "_C"}
CONCURRENCY = {"threading", "multiprocessing", "concurrent", "subprocess", "asyncio"}
INTROSPECTION = {"gc", "inspect", "ctypes", "importlib", "signal", "builtins", "pickle", "dis"}


def imports(src: Source) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.lineno, node.module.split(".")[0]))
    return out


def extra_threads_or_streams(src: Source) -> list[str]:
    found = [f"line {n}: import {m}" for n, m in imports(src) if m in CONCURRENCY]
    pattern = r"torch\.cuda\.(Stream|stream)\b|cudaStreamCreate|os\.fork|std::thread|pthread_create"
    found += [f"line {i}: {m.group(0)}" for i, line in enumerate(src.text.splitlines(), 1)
              for m in [re.search(pattern, line)] if m]
    return found


def patching_or_introspection(src: Source) -> list[str]:
    found = [f"line {n}: import {m}" for n, m in imports(src) if m in INTROSPECTION]
    for node in ast.walk(src.tree):
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        for t in targets:
            if isinstance(t, ast.Attribute) and dotted(t).split(".")[0] in (
                    "torch", "time", "json", "os", "sys", "F", "triton", "tl", "np", "kforge_nb"):
                found.append(f"line {node.lineno}: assigns {dotted(t)}")
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            if name in ("exec", "eval", "compile", "__import__", "setattr", "globals",
                        "sys._getframe", "sys.settrace", "sys.setprofile"):
                found.append(f"line {node.lineno}: {name}()")
        if isinstance(node, ast.Attribute) and (dotted(node) in ("sys.modules", "sys._getframe")
                                                or node.attr in INTERPRETER_INTERNALS):
            found.append(f"line {node.lineno}: {dotted(node) or node.attr}")
    return sorted(set(found))


DEFAULT_BANS = [
    Rule("torch-compute-in-forward", "ModelNew.forward computes with torch ops instead of the "
         "kernel (allow an op deliberately with --allow NAME)", torch_compute_in_forward),
    Rule("precision-switch", "changes precision under the strict policy (use --precision to "
         "opt in to tf32/bf16/fp16)", precision_switch),
    Rule("fast-math", "fast-math flags or pragmas change IEEE results", fast_math),
    Rule("swallowed-exception", "a broad except that hides errors", swallowed_exception),
    Rule("extra-threads-or-streams", "threads, processes or extra streams escape the timer and "
         "the synchronisation", extra_threads_or_streams),
    Rule("patching-or-introspection", "patches library functions or reaches into the "
         "interpreter, which could fake a verdict or a timing", patching_or_introspection),
]


def defines_modelnew(src: Source) -> list[str]:
    return [] if src.candidate_class() else ["no `class ModelNew(nn.Module)` (or NewModel)"]


REQUIRED_FOR_ALL = [Rule("defines-modelnew", "a candidate defines class ModelNew with the "
                         "reference's constructor arguments", defines_modelnew)]


def text_rule(name: str, reason: str, pattern: str, must_match: bool) -> Rule:
    """A user's --ban/--require regex, or a target's required text pattern."""
    regex = re.compile(pattern, re.MULTILINE)

    def check(src: Source) -> list[str]:
        hits = [f"line {src.text.count(chr(10), 0, m.start()) + 1}: {m.group(0)[:60]}"
                for m in regex.finditer(src.text)]
        if must_match:
            return [] if hits else [f"pattern {pattern!r} not found"]
        return hits
    return Rule(name, reason, check)


@dataclass
class Guardrails:
    """Which rules run: defaults, the target's requirements, and the user's own."""
    defaults: bool = True
    bans: list[str] = field(default_factory=list)
    requires: list[str] = field(default_factory=list)
    allow: list[str] = field(default_factory=list)
    precision: str = "strict"

    def rules(self, target_rules: list[Rule]) -> list[Rule]:
        # --allow '*': the candidate may compute with torch (a baseline, a memory sweep), so
        # the target's kernel requirements do not apply either
        rules = list(REQUIRED_FOR_ALL) + ([] if "*" in self.allow else list(target_rules))
        if self.defaults:
            rules += DEFAULT_BANS
        rules += [text_rule(f"user-ban:{p}", "banned by the user", p, False) for p in self.bans]
        rules += [text_rule(f"user-require:{p}", "required by the user", p, True)
                  for p in self.requires]
        return rules

    def check(self, text: str, tree: ast.Module, target_rules: list[Rule],
              reference: str = "") -> list[tuple[Rule, list[str]]]:
        src = Source(text, tree, frozenset(self.allow), self.precision, reference)
        fired = []
        for rule in self.rules(target_rules):
            where = rule.check(src)
            if where:
                fired.append((rule, where))
        return fired
