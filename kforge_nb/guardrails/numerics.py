"""Default bans on what a candidate computes and how precisely: torch compute called in
forward, precision lowered under the strict policy, fast-math."""
from __future__ import annotations

import ast
import re

from ..compute_ops import COMPUTE_FUNCTIONS
from ..cpp_source import line_at, strip_cpp_comments_and_strings
from .source import Source, dotted, looks_native, native_hits


TORCH_NAMESPACES = ("torch", "torch.nn.functional", "F", "nn.functional", "torch.special",
                    "torch.linalg", "torch.fft", "np", "numpy",
                    # torch.fx's spelling of the same functions (see FX_SPELLINGS)
                    "torch._C._nn", "torch._C._special", "torch._C._linalg", "torch._C._fft")


def torch_compute_in_forward(src: Source) -> list[str]:
    """A fast first pass: a torch (or NumPy) compute function called by its own name in
    forward. It errs on the side of letting a candidate through: attributes, helper objects
    and submodules are judged at run time by what they dispatch (evaluator/worker/audit.py), so a
    helper called `self.softmax` or a shader compiled in forward is never rejected here; nor
    is NumPy's arithmetic on Python numbers (`np.sqrt(x.shape[-1])`): no tensor data there."""
    if "*" in src.allowed_ops:
        return []
    found = []
    scalars = HostScalars(src)
    for fn in src.forward_and_helpers():
        for node in ast.walk(fn):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult) \
                    and "matmul" not in src.allowed_ops:     # `@` is torch.matmul
                found.append(f"line {node.lineno}: `@` matrix product")
            if not isinstance(node, ast.Call):
                continue
            name = dotted(node.func)
            namespace, _, leaf = name.rpartition(".")
            if namespace in TORCH_NAMESPACES and leaf in COMPUTE_FUNCTIONS \
                    and name not in src.allowed_ops and leaf not in src.allowed_ops \
                    and not (namespace in ("np", "numpy") and scalars.all_of(node, fn)):
                found.append(f"line {node.lineno}: {name}()")
    return found


# What a wrapper reads off a tensor without its data: sizes, strides, counts.
SIZE_METHODS = {"size", "stride", "numel", "nelement", "dim", "ndimension", "element_size",
                "storage_offset"}
SIZE_ATTRIBUTES = {"shape", "ndim"}
# Python functions that take and give Python numbers (`tuple(x.shape)`: a sequence of them)
NUMBER_FUNCTIONS = {"len", "int", "float", "abs", "min", "max", "round", "pow", "divmod",
                    "tuple", "list"}


class HostScalars:
    """Whether an expression is a Python number made from sizes and constants (a tensor's
    shape, `len`, `math.*`, arithmetic of those, a local or `self.` name only ever assigned
    such values, a constructor's argument): host arithmetic, never tensor data."""

    def __init__(self, src: Source):
        cls = src.candidate_class()
        init = next((n for n in (cls.body if cls else []) if isinstance(n, ast.FunctionDef)
                     and n.name == "__init__"), None)
        self.arguments = {a.arg for a in init.args.args[1:]} if init else set()
        self.attributes = self._names_assigned(init, attributes=True) if init else {}

    def all_of(self, call: ast.Call, fn: ast.AST) -> bool:
        values = [*call.args, *(k.value for k in call.keywords)]
        locals_ = self._names_assigned(fn, attributes=False)
        return bool(values) and all(self.number(v, locals_) for v in values)

    def number(self, node: ast.AST, locals_: dict, depth: int = 0) -> bool:
        if depth > 20:
            return False

        def numbers(*nodes: ast.AST) -> bool:
            return all(self.number(n, locals_, depth + 1) for n in nodes)

        if isinstance(node, ast.Constant):
            return isinstance(node.value, (int, float))
        if isinstance(node, ast.BinOp):
            return numbers(node.left, node.right)
        if isinstance(node, ast.UnaryOp):
            return numbers(node.operand)
        if isinstance(node, (ast.Tuple, ast.List)):     # a shape: (1, *x.shape[1:])
            return numbers(*node.elts)
        if isinstance(node, ast.Starred):
            return numbers(node.value)
        if isinstance(node, ast.Subscript):           # x.shape[-1], x.size()[0], shape[1:]
            return self._sizes(node.value) or numbers(node.value)
        if isinstance(node, ast.Attribute) and dotted(node).startswith("self."):
            values = self.attributes.get(dotted(node))
            return values is not None and numbers(*values)
        if isinstance(node, ast.Name):
            return numbers(*locals_[node.id]) if node.id in locals_ else \
                node.id in self.arguments
        if isinstance(node, ast.Call) and not self._sizes(node):
            name = dotted(node.func)
            return (name in NUMBER_FUNCTIONS or name.startswith("math.")) and \
                numbers(*node.args, *(k.value for k in node.keywords))
        return self._sizes(node)

    @staticmethod
    def _sizes(node: ast.AST) -> bool:
        """`x.shape`, `x.size(...)`, `x.stride(...)`, `x.numel()`: sizes, not data."""
        if isinstance(node, ast.Attribute):
            return node.attr in SIZE_ATTRIBUTES
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in SIZE_METHODS

    @staticmethod
    def _names_assigned(fn: ast.AST, attributes: bool) -> dict[str, list[ast.AST]]:
        """name (or `self.name`) -> every value assigned to it in `fn`; a name also bound
        otherwise (a loop, a `with`, an augmented assignment) is left out: unknown."""
        out: dict[str, list[ast.AST]] = {}
        unknown = set()
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                key = dotted(target) if attributes else (
                    target.id if isinstance(target, ast.Name) else "")
                if key:
                    out.setdefault(key, []).append(node.value)
                    continue
            for target in _bound_names(node):
                unknown.add(target)
        return {k: v for k, v in out.items() if k not in unknown}


def _bound_names(node: ast.AST) -> list[str]:
    """Names (and `self.x`) a statement binds other than by a plain `a = value`."""
    targets = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.comprehension)):
        targets = [node.target]
    elif isinstance(node, ast.withitem) and node.optional_vars is not None:
        targets = [node.optional_vars]
    elif isinstance(node, ast.NamedExpr):
        targets = [node.target]
    return [dotted(n) for t in targets for n in ast.walk(t)
            if isinstance(n, (ast.Name, ast.Attribute)) and dotted(n)]


def _is_false(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in (False, 0) and node.value is not None


def _assignments(tree: ast.AST):
    """(line, target, value) for every `a.b = value` (each target of `a = b = value`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                yield node.lineno, t, node.value
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            yield node.lineno, node.target, node.value


# Settings that only say how precise torch's own math is: assigning them is judged by the
# precision rule (by the value given), never as patching a library.
PRECISION_SETTINGS = {"allow_tf32", "allow_fp16_reduced_precision_reduction",
                      "allow_bf16_reduced_precision_reduction", "fp32_precision"}
LOW_DTYPES = re.compile(r"^(?:torch|tl|triton\.language)\.(?:float16|half|bfloat16|float8\w*)$")


def precision_switch(src: Source) -> list[str]:
    """Lowering precision in code. Asking for full precision (allow_tf32 = False,
    set_float32_matmul_precision("highest"), input_precision="ieee", autocast(enabled=False))
    is not a switch; what a comment, a docstring or a message says is not code; dtypes the
    reference itself uses are not switches."""
    if src.precision != "strict":
        return []
    found: list[tuple[int, str, str]] = []     # (line, what, the text that the reference
    for line, target, value in _assignments(src.tree):   # may use to make it no switch)
        leaf = target.attr if isinstance(target, ast.Attribute) else ""
        strict = (isinstance(value, ast.Constant) and value.value == "ieee"
                  if leaf == "fp32_precision" else _is_false(value))
        if leaf in PRECISION_SETTINGS and not strict:
            what = f"{dotted(target) or leaf} = {ast.unparse(value)}"
            found.append((line, what, what))
    off = set()                                  # autocast(enabled=False): full precision
    for node in ast.walk(src.tree):
        if not isinstance(node, ast.Call):
            continue
        leaf = node.func.attr if isinstance(node.func, ast.Attribute) else dotted(node.func)
        if leaf == "autocast" and any(kw.arg == "enabled" and _is_false(kw.value)
                                      for kw in node.keywords):
            off.add(id(node.func))
        if leaf in ("half", "bfloat16") and isinstance(node.func, ast.Attribute) \
                and not node.args and not node.keywords:
            found.append((node.lineno, f".{leaf}()", f".{leaf}()"))
        if leaf == "set_float32_matmul_precision" and not (
                node.args and isinstance(node.args[0], ast.Constant)
                and node.args[0].value == "highest"):
            what = ast.unparse(node)[:60]
            found.append((node.lineno, what, what))
        for kw in node.keywords:
            if kw.arg in ("allow_tf32", "allow_fp16_reduced_precision_reduction",
                          "allow_bf16_reduced_precision_reduction") and not _is_false(kw.value):
                what = f"{kw.arg}={ast.unparse(kw.value)}"
                found.append((node.lineno, what, what))
            if kw.arg == "input_precision" and not (isinstance(kw.value, ast.Constant)
                                                    and kw.value.value == "ieee"):
                what = f"input_precision={ast.unparse(kw.value)}"
                found.append((node.lineno, what, what))
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Attribute) and LOW_DTYPES.match(dotted(node)):
            # Triton's tl.bfloat16 is the reference's torch.bfloat16
            found.append((node.lineno, dotted(node), f"torch.{node.attr}"))
        if id(node) in off:
            continue
        if (isinstance(node, ast.Attribute) and node.attr == "autocast") or \
                (isinstance(node, ast.Name) and node.id == "autocast"):
            found.append((node.lineno, dotted(node) or "autocast", "autocast"))
        if isinstance(node, ast.ImportFrom) and any(a.name == "autocast" for a in node.names):
            found.append((node.lineno, "import autocast", "autocast"))
    return [f"line {n}: {what}" for n, what, key in sorted(set(found)) if key not in src.reference]


# Compiler flags that trade IEEE results for speed, as a flag string gives them
# (`extra_cflags=["-O3", "-ffast-math"]`): the whole whitespace-separated word.
FAST_FLAGS = re.compile(r"-ffast-math|-Ofast|-funsafe-math-optimizations|-ffinite-math-only|"
                        r"-fassociative-math|-freciprocal-math|-fno-signed-zeros|"
                        r"-fapprox-func|-fcx-limited-range|--?use[_-]fast[_-]math|"
                        r"--?ftz=true|--?prec-div=false|--?prec-sqrt=false")
# The same in kernel source: an optimize pragma or attribute (whatever string it is given),
# Metal's fast:: functions.
FAST_NATIVE = re.compile(r"#\s*pragma\s+(?:GCC\s+optimize|clang\s+fp\b|float_control)|"
                         r"__attribute__\s*\(\(\s*(?:__)?optimize(?:__)?\b|"
                         r"\[\[\s*gnu\s*::\s*optimize\b|\bfast\s*::|\b__fmul_rn\b")


def fast_math(src: Source) -> list[str]:
    """Fast-math in code: a flag string, an optimize pragma or attribute in kernel source,
    a `fast_math=`/`fastmath=` argument, Triton's libdevice `fast_*` approximations. A comment
    or docstring that mentions fast-math is not code."""
    found = []
    for line, text in src.code_strings():   # kernel source: its code, not its comments
        code = strip_cpp_comments_and_strings(text) if looks_native(text) else text
        found += [f"line {line + line_at(code, m.start()) - 1}: {m.group(0).strip(',;[]()')}"
                  for m in re.finditer(r"\S+", code)
                  if FAST_FLAGS.fullmatch(m.group(0).strip(",;'\"[]()"))]
    found += native_hits(src, FAST_NATIVE)
    for node in ast.walk(src.tree):
        if isinstance(node, ast.keyword) and node.arg and \
                re.fullmatch(r"(?i)(use_)?fast_?math", node.arg) and not _is_false(node.value):
            found.append(f"line {node.value.lineno}: {node.arg}={ast.unparse(node.value)}")
        if isinstance(node, ast.Attribute) and node.attr.startswith("fast_") and \
                re.search(r"\b(libdevice|math)\b", dotted(node)):
            found.append(f"line {node.lineno}: {dotted(node)}")
    return found
