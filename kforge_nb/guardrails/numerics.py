"""Default bans on what a candidate computes and how precisely: torch compute called in
forward, precision lowered under the strict policy, fast-math."""
from __future__ import annotations

import ast
import re

from ..cpp_source import line_at, strip_cpp_comments_and_strings
from .source import Source, dotted, looks_native, native_hits


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
                    "torch.linalg", "torch.fft", "np", "numpy",
                    # torch.fx's spelling of the same functions (see FX_SPELLINGS)
                    "torch._C._nn", "torch._C._special", "torch._C._linalg", "torch._C._fft")


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
            found.append((node.lineno, dotted(node), dotted(node)))
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
