"""Static guardrails: rules read off a candidate's source before any of it runs.

A rule has a name (what a verdict lists), a one-line reason, and a check that returns the
places it fired. Targets add their required patterns; users add bans and requirements of
their own (`--ban REGEX`, `--require REGEX`) and allow torch ops they want kept (`--allow`).

The default rules read code, never what is said about it: Python through its syntax tree
(docstrings, comments and strings that are only prose do not count), kernel source (the
strings that are C/C++/CUDA/Metal) through kforge_nb.cpp_source, with its comments and string
literals stripped. Each rule says where it fired as `line N: what`, N the candidate's line.
A user's --ban/--require regex still reads the whole text, as written.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Callable

from .cpp_source import line_at, strip_cpp_comments_and_strings

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

    def code_strings(self) -> list[tuple[int, str]]:
        """(line, value) of the string constants the code uses: not docstrings, not a bare
        string standing as a statement (a comment in all but name). `"a" + "b"` counts as the
        one string it makes; f-strings' constant parts count one by one."""
        if getattr(self, "_code_strings", None) is None:
            prose = {id(n.value) for n in ast.walk(self.tree)
                     if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
            folded, out = set(), []
            for node in ast.walk(self.tree):
                if id(node) in folded or id(node) in prose:
                    continue
                value = _constant_str(node)
                if value is None:
                    continue
                if isinstance(node, ast.BinOp):
                    folded.update(id(n) for n in ast.walk(node))
                out.append((node.lineno, value))
            self._code_strings = out
        return self._code_strings

    def native_sources(self) -> list[tuple[int, str]]:
        """(line, text) of the strings that are kernel source (C/C++/CUDA/Metal): what the
        native rules read, after their comments and string literals are stripped."""
        return [(line, text) for line, text in self.code_strings() if looks_native(text)]

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


def _constant_str(node: ast.AST) -> str | None:
    """The value of a string constant, or of a `+` chain of them; None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _constant_str(node.left), _constant_str(node.right)
        if left is not None and right is not None:
            return left + right
    return None


NATIVE_MARKERS = re.compile(r'extern\s+"|__global__|\bkernel\s+void\b|^\s*#\s*[a-z]+|[;{}]',
                            re.MULTILINE)


def looks_native(text: str) -> bool:
    """Whether a string is C/C++/CUDA/Metal source rather than a name, a message or a flag:
    code (comments and literals aside) with a statement, a block, a directive or a kernel."""
    return bool(NATIVE_MARKERS.search(strip_cpp_comments_and_strings(text)))


def native_hits(src: "Source", pattern: str | re.Pattern, strings: bool = True,
                skip_includes: bool = False) -> list[str]:
    """`line N: match` for each match of `pattern` in the code of every kernel source: its
    comments blanked and (when `strings`) the insides of its string literals too. N is the
    candidate's line."""
    regex = re.compile(pattern) if isinstance(pattern, str) else pattern
    found = []
    for first, text in src.native_sources():
        code = strip_cpp_comments_and_strings(text, strings=strings)
        if skip_includes:
            code = re.sub(r"(?m)^[ \t]*#[ \t]*include[^\n]*", "", code)
        for m in regex.finditer(code):
            what = " ".join(m.group(0).split())
            found.append(f"line {first + line_at(code, m.start()) - 1}: {what}")
    return found


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
CONCURRENCY = {"threading", "_thread", "multiprocessing", "concurrent", "subprocess", "asyncio",
               "_posixsubprocess", "pty"}
INTROSPECTION = {"gc", "inspect", "ctypes", "importlib", "signal", "builtins", "pickle", "dis"}


def imports(src: Source) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.lineno, node.module.split(".")[0]))
    return out


STREAM_MAKERS = {"torch.cuda.Stream", "torch.cuda.ExternalStream", "torch.Stream",
                 "torch.cuda.streams.Stream", "torch.cuda.streams.ExternalStream",
                 "torch.mps.Stream", "torch.xpu.Stream"}
STREAM_SWITCHES = {"torch.cuda.stream", "torch.cuda.set_stream", "torch.cuda.StreamContext",
                   "torch.stream"}
THE_STREAM = re.compile(r"(?:^|\.)(?:current_stream|default_stream)$")
PROCESS_STARTERS = {"os.fork", "os.forkpty", "os.posix_spawn", "os.posix_spawnp", "os.system",
                    "os.popen", "pty.fork"}
# In kernel source: starting a thread, a process or a stream. Asking how many hardware
# threads there are (std::thread::hardware_concurrency) or which thread this is starts nothing.
THREADS_NATIVE = re.compile(
    r"\bstd\s*::\s*j?thread\b(?!\s*::\s*(?:hardware_concurrency|id)\b)|\bstd\s*::\s*async\b|"
    r"\bpthread_create\b|\bcu(?:da)?StreamCreate\w*|(?<![\w.:>])v?fork\s*\(|\bposix_spawnp?\b")


def the_current_stream(node: ast.AST | None, names: set[str]) -> bool:
    """torch's current (or default) stream, None, or a name only ever bound to one of them."""
    return node is None or (isinstance(node, ast.Constant) and node.value is None) or (
        isinstance(node, ast.Call) and bool(THE_STREAM.search(dotted(node.func)))) or (
        isinstance(node, ast.Name) and node.id in names)


def extra_threads_or_streams(src: Source) -> list[str]:
    found = [f"line {n}: import {m}" for n, m in imports(src) if m in CONCURRENCY]
    bound: dict[str, list[ast.AST]] = {}       # `s = torch.cuda.current_stream()` and later
    for node in ast.walk(src.tree):            # `with torch.cuda.stream(s):`
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    bound.setdefault(t.id, []).append(
                        node.value if not isinstance(node, ast.AugAssign) else t)
                elif isinstance(t, (ast.Tuple, ast.List)):
                    for e in ast.walk(t):
                        if isinstance(e, ast.Name):
                            bound.setdefault(e.id, []).append(e)
    current_names = {name for name, values in bound.items()
                     if all(the_current_stream(v, set()) and v is not None for v in values)}
    switch_funcs = set()
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Call) and dotted(node.func) in STREAM_SWITCHES:
            switch_funcs.add(id(node.func))
            arg = node.args[0] if node.args else next(
                (kw.value for kw in node.keywords if kw.arg == "stream"), None)
            current = the_current_stream(arg, current_names)
            if not current:       # the current (or default) stream is not an extra stream
                found.append(f"line {node.lineno}: {dotted(node.func)}({ast.unparse(arg)[:40]})")
    for node in ast.walk(src.tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = dotted(node)
        if name in STREAM_MAKERS or name in PROCESS_STARTERS or \
                re.match(r"os\.(spawn|exec)\w+$", name) or \
                (name in STREAM_SWITCHES and id(node) not in switch_funcs):
            found.append(f"line {node.lineno}: {name}")
    found += native_hits(src, THREADS_NATIVE)
    return found


# torch.fx writes some public functions by the builtin they are: `torch._C._nn.gelu` is
# `torch.nn.functional.gelu`. Called by such a name, `torch._C` is not reaching into the
# interpreter (`kforge model` keeps parts as fx wrote them).
FX_SPELLINGS = re.compile(r"^torch\._C\._(?:nn|fft|linalg|special)\.[A-Za-z]\w*$")


def fx_spelled_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and bool(FX_SPELLINGS.match(dotted(node.func)))


def patching_or_introspection(src: Source) -> list[str]:
    found = [f"line {n}: import {m}" for n, m in imports(src) if m in INTROSPECTION]
    public = set()                 # the `torch._C` inside torch._C._nn.gelu(...) and the like
    for node in ast.walk(src.tree):
        if fx_spelled_call(node):
            public.update(id(n) for n in ast.walk(node.func) if isinstance(n, ast.Attribute))
    for node in ast.walk(src.tree):
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        for t in targets:
            if isinstance(t, ast.Attribute) and dotted(t).startswith("torch.backends.") \
                    and t.attr in PRECISION_SETTINGS:
                continue           # a precision setting: the precision rule judges its value
            if isinstance(t, ast.Attribute) and dotted(t).split(".")[0] in (
                    "torch", "time", "json", "os", "sys", "F", "triton", "tl", "np", "kforge_nb"):
                found.append(f"line {node.lineno}: assigns {dotted(t)}")
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            if name in ("exec", "eval", "compile", "__import__", "setattr", "globals",
                        "sys._getframe", "sys.settrace", "sys.setprofile"):
                found.append(f"line {node.lineno}: {name}()")
        if isinstance(node, ast.Attribute) and id(node) not in public and (
                dotted(node) in ("sys.modules", "sys._getframe")
                or node.attr in INTERPRETER_INTERNALS):
            found.append(f"line {node.lineno}: {dotted(node) or node.attr}")
    return sorted(set(found))


# --- kernel source that does not compute ----------------------------------------------------

# What C++/CUDA source may name in libtorch's namespaces (at::, torch::, c10::): types,
# dtype/device constants, allocation of outputs and workspaces, the current stream and device
# guards, and the thread pool; everything else there (at::matmul, torch::mm, at::cpu::_softmax,
# at::native::...) is libtorch computing, and a direct at::cpu:: or at::native:: call is not
# even seen by the run-time audit.
LIBTORCH_ALLOWED = {
    "Tensor", "TensorOptions", "TensorList", "Scalar", "ScalarType", "IntArrayRef", "ArrayRef",
    "OptionalIntArrayRef", "Half", "BFloat16", "Device", "DeviceType", "DeviceGuard", "Layout",
    "MemoryFormat", "optional", "nullopt", "TensorAccessor", "PackedTensorAccessor",
    "PackedTensorAccessor32", "PackedTensorAccessor64", "GenericPackedTensorAccessor",
    "RestrictPtrTraits", "DefaultPtrTraits", "empty", "empty_like", "empty_strided", "zeros",
    "zeros_like", "cuda", "getCurrentCUDAStream", "getDefaultCUDAStream", "CUDAStream",
    "CUDAGuard", "OptionalCUDAGuard", "getCurrentDeviceProperties", "current_device",
    "parallel_for", "get_num_threads", "irange", "elementSize", "toString", "Error",
    "TypeMeta", "from_blob", "data_ptr", "numel", "size", "sizes", "stride", "strides", "dim",
    "scalar_type", "is_contiguous", "is_cuda",
}
ENUMS = {"ScalarType", "DeviceType", "Layout", "MemoryFormat"}
LIBTORCH_NAME = re.compile(r"(?<![\w:])(?:at|torch|c10|aten)(?:\s*::\s*\w+)+")
LIBRARY_CALLS = re.compile(r"\b(?:cblas_\w+|[sdcz](?:gemm|gemv|syrk|trsm)_|cublas\w*|cudnn\w+|"
                           r"mkl_\w+|dnnl_\w+|dnnl\s*::|mkldnn\w*|cusparse\w*|cusolver\w*|"
                           r"cufft\w*)(?!\w)")
LIBTORCH_ALIAS = re.compile(r"\busing\s+namespace\s+(?:at|torch|c10|aten)\b|"
                            r"\bnamespace\s+\w+\s*=\s*(?:at|torch|c10|aten)\b")


def libtorch_allowed(name: str) -> bool:
    parts = [p.strip() for p in name.split("::")][1:]
    for i, part in enumerate(parts):
        if part in LIBTORCH_ALLOWED or re.fullmatch(r"k[A-Z]\w*", part) or \
                (i and parts[i - 1] in ENUMS):
            continue
        return False
    return True


def native_calls_libtorch(src: Source) -> list[str]:
    found = [hit for hit in native_hits(src, LIBTORCH_NAME, skip_includes=True)
             if not libtorch_allowed(hit.split(": ", 1)[1])]
    found += native_hits(src, LIBTORCH_ALIAS, skip_includes=True)
    found += native_hits(src, LIBRARY_CALLS, skip_includes=True)
    return found


DYNAMIC_SYMBOLS = re.compile(
    r"\b(?:dlopen|dlmopen|dlsym|dlvsym|dladdr1?|dlinfo|RTLD_\w+)\b|"
    r"__attribute__\s*\(\(\s*(?:__)?(?:constructor|destructor|section|ifunc|alias|weakref)\b|"
    r"\[\[\s*gnu\s*::\s*(?:constructor|destructor|section|ifunc|alias)\b|"
    r"#\s*pragma\s+init\b|\b__libc_\w+")


def native_dynamic_symbols(src: Source) -> list[str]:
    return native_hits(src, DYNAMIC_SYMBOLS, skip_includes=True)


# Python that reads tensor memory through raw buffers, where host code computes outside any
# kernel: NumPy over a pointer or a buffer, DLPack, ctypes arrays, memoryview. Passing
# x.data_ptr() to a native function (what every cpp/cuda kernel does) is none of these.
RAW_BUFFER_ATTRS = {"ctypes", "ctypeslib", "__array_interface__", "__cuda_array_interface__",
                    "__dlpack__", "__array__", "__buffer__"}
RAW_BUFFER_NAMES = {"np.frombuffer", "numpy.frombuffer", "np.from_dlpack", "numpy.from_dlpack",
                    "torch.from_dlpack", "torch.to_dlpack", "torch.frombuffer",
                    "np.lib.stride_tricks", "numpy.lib.stride_tricks"}


def host_buffer_access(src: Source) -> list[str]:
    found = []
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Attribute):
            name = dotted(node)
            if node.attr in RAW_BUFFER_ATTRS or name in RAW_BUFFER_NAMES or \
                    name.startswith("torch.utils.dlpack"):
                found.append(f"line {node.lineno}: {name or node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "memoryview":
            found.append(f"line {node.lineno}: memoryview()")
        elif isinstance(node, ast.ImportFrom) and node.module and (
                node.module.startswith(("torch.utils.dlpack", "numpy.ctypeslib"))
                or any(a.name in ("ctypeslib", "dlpack", "frombuffer", "from_dlpack")
                       for a in node.names)):
            found.append(f"line {node.lineno}: from {node.module} import "
                         f"{', '.join(a.name for a in node.names)}")
        elif isinstance(node, ast.Import) and any(
                a.name.startswith(("torch.utils.dlpack", "numpy.ctypeslib")) for a in node.names):
            found.append(f"line {node.lineno}: import {node.names[0].name}")
    return sorted(set(found), key=lambda f: int(f.split()[1].rstrip(":")))


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
    Rule("native-calls-libtorch", "C++/CUDA source calls libtorch (at::, torch::, c10::) or a "
         "BLAS/DNN library (cblas, sgemm_, cuBLAS, cuDNN, MKL, oneDNN) to compute instead of "
         "computing itself; allowed there are types, dtype/device constants, allocation "
         "(empty*, zeros*), the current stream, device guards and at::parallel_for",
         native_calls_libtorch),
    Rule("native-dynamic-symbols", "native source loads symbols at run time (dlopen, dlsym, "
         "RTLD_*) or runs code at load time (constructor/destructor/section attributes), "
         "ways to reach library compute or act outside the calls that are judged",
         native_dynamic_symbols),
    Rule("host-buffer-access", "reads tensor memory from Python through raw buffers (NumPy "
         "ctypeslib/frombuffer, DLPack, ctypes arrays, memoryview), so host code can compute "
         "outside the kernel; hand tensors to the kernel (x.data_ptr() for native code)",
         host_buffer_access),
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
