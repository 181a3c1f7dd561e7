"""Default bans on ways around the timer and the audit: swallowed errors, extra threads,
processes and streams, patching or introspecting the interpreter, raw host buffers."""
from __future__ import annotations

import ast
import re

from .numerics import PRECISION_SETTINGS
from .source import Source, dotted, native_hits


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
