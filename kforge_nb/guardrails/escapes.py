"""Default bans on ways around the timer and the audit: swallowed errors, extra threads,
processes and streams, patching or introspecting the interpreter, raw host buffers."""
from __future__ import annotations

import ast
import re

from .names import imports
from .numerics import PRECISION_SETTINGS
from .source import Source, dotted, native_hits


def swallowed_exception(src: Source) -> list[str]:
    """A broad `except` whose body only discards the error: pass, continue, or a return of
    nothing, a constant or a name as it was. One that builds or calls a fallback
    (`return cpp.load(PORTABLE)`) handles the error."""
    found = []
    for node in ast.walk(src.tree):
        if isinstance(node, ast.ExceptHandler):
            broad = node.type is None or dotted(node.type) in ("Exception", "BaseException")
            if broad and all(map(discards, node.body)):
                found.append(f"line {node.lineno}: broad `except` that discards the error")
    return found


def discards(statement: ast.stmt) -> bool:
    if isinstance(statement, ast.Return):
        return statement.value is None or isinstance(statement.value, (ast.Constant, ast.Name))
    return isinstance(statement, (ast.Pass, ast.Continue)) or (
        isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant))


# Rewriting code objects, reaching another module's namespace through a function or a frame,
# or asking which dispatch mode is active: ways to hide from the audit or rewrite it.
INTERPRETER_INTERNALS = {
    "__code__", "co_filename", "f_back", "f_code", "f_globals", "f_locals", "tb_frame",
    "gi_frame", "__globals__", "__closure__", "__builtins__", "_python_dispatch",
    "_get_current_dispatch_mode", "_len_torch_dispatch_stack", "_get_dispatch_mode",
    "_get_torch_dispatch_mode", "_is_torch_function_mode_enabled", "_DisableTorchDispatch",
    "_DisablePythonDispatcher", "_ExcludeDispatchKeyGuard", "_unset_dispatch_mode",
    "_pop_torch_dispatch_stack", "_set_dispatch_mode", "_DisableTorchFunction",
    "_DisableTorchFunctionSubclass", "_C",
}
# Builtins and functions that run code given as text, rebind by name or hand out frames and
# modules: a reference is enough (`functools.partial(eval, CODE)` calls it later).
RUNS_OR_REACHES = {"exec", "eval", "compile", "__import__", "setattr", "delattr", "globals",
                   "breakpoint", "sys._getframe", "sys._current_frames", "sys.settrace",
                   "sys.setprofile", "sys.modules", "sys.addaudithook"}
CONCURRENCY = {"threading", "_thread", "multiprocessing", "concurrent", "subprocess", "asyncio",
               "_posixsubprocess", "pty"}
# ... of which these start nothing: they ask (how many CPUs, which thread) or lock
CONCURRENCY_QUERIES = {"multiprocessing.cpu_count", "threading.get_ident",
                       "threading.get_native_id", "threading.current_thread",
                       "threading.main_thread", "threading.active_count", "threading.Lock",
                       "threading.RLock", "_thread.get_ident", "_thread.allocate_lock"}
INTROSPECTION = {"gc", "inspect", "ctypes", "importlib", "signal", "builtins", "pickle", "dis"}
# Namespaces whose functions a verdict or a timing may rest on: assigning into them is patching
# (as spelled, or as bound: `F` is torch.nn.functional wherever it was imported so).
PROTECTED = {"torch", "time", "json", "os", "sys", "triton", "numpy", "builtins", "kforge_nb",
             "F", "tl", "np"}
# torch settings that only choose among torch's own algorithms (precision settings are the
# precision rule's, judged by the value given)
ALGORITHM_SETTINGS = {"torch.backends.cudnn.benchmark", "torch.backends.cudnn.deterministic",
                      "torch.backends.cudnn.enabled", "torch.backends.mkldnn.enabled"}


def concurrency_uses(src: Source) -> list[str]:
    """Threads and processes started from Python: a name from a concurrency module that is
    not a query, imported by name or used (as bound: `import multiprocessing as mp;
    mp.Pool` is multiprocessing.Pool, `mp.cpu_count()` asks and starts nothing)."""
    found = [f"line {n}: imports {full}" for n, full, member in imports(src.tree)
             if member and full.split(".")[0] in CONCURRENCY and full not in CONCURRENCY_QUERIES]
    found += [f"line {line}: {written}" for line, name, written in src.uses()
              if name.split(".")[0] in CONCURRENCY and name not in CONCURRENCY_QUERIES]
    return found


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
    found = concurrency_uses(src)
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
    for node, _ in src.bindings.uses(src.tree):
        for name in sorted(src.names(node)):
            if name in STREAM_MAKERS or name in PROCESS_STARTERS or \
                    re.match(r"os\.(spawn|exec)\w+$", name) or \
                    (name in STREAM_SWITCHES and id(node) not in switch_funcs):
                found.append(f"line {node.lineno}: {dotted(node) or name}")
    found += native_hits(src, THREADS_NATIVE)
    return list(dict.fromkeys(found))


# torch.fx writes some public functions by the builtin they are: `torch._C._nn.gelu` is
# `torch.nn.functional.gelu`. Called by such a name, `torch._C` is not reaching into the
# interpreter (`kforge model` keeps parts as fx wrote them).
FX_SPELLINGS = re.compile(r"^torch\._C\._(?:nn|fft|linalg|special)\.[A-Za-z]\w*$")


def patching_or_introspection(src: Source) -> list[str]:
    """Patching what a verdict rests on, or reaching into the interpreter, judged by what each
    name is bound to: `from torch._C import _DisableTorchDispatch as D` then `D()` is
    torch._C._DisableTorchDispatch at both lines; `run = exec` is exec."""
    found = []
    for line, full, _ in imports(src.tree):
        if full.split(".")[0] in INTROSPECTION or reaches_in(full) or kforge_private(full):
            found.append(f"line {line}: imports {full}")
    for line, name, written in src.uses():
        if FX_SPELLINGS.match(name):
            continue               # torch._C._nn.gelu: a public function as torch.fx spells it
        if name in RUNS_OR_REACHES or reaches_in(name) or kforge_private(name):
            found.append(f"line {line}: {written}")
    for node in ast.walk(src.tree):    # `f().__code__`: an attribute of no name chain
        if isinstance(node, ast.Attribute) and not dotted(node) and \
                node.attr in INTERPRETER_INTERNALS:
            found.append(f"line {node.lineno}: .{node.attr}")
    for line, target in assignment_targets(src.tree):
        for name in sorted(assigned_names(src, target)):
            if name.split(".")[0] in PROTECTED and name not in ALGORITHM_SETTINGS and not (
                    name.startswith("torch.backends.") and
                    name.rsplit(".", 1)[-1] in PRECISION_SETTINGS):   # the precision rule's
                found.append(f"line {line}: assigns {name}")
    return sorted(set(found), key=by_line)


def reaches_in(name: str) -> bool:
    return any(part in INTERPRETER_INTERNALS for part in name.split("."))


def kforge_private(name: str) -> bool:
    """kforge's own modules other than the runtime a kernel is built with (the evaluator's
    audit and harness run in the candidate's process: they are not the candidate's to read
    or rewrite). The bare package is only a way to its runtime."""
    parts = name.split(".")
    return parts[0] == "kforge_nb" and len(parts) > 1 and parts[1] != "runtime"


def assignment_targets(tree: ast.AST):
    """(line, target) for every target assigned, augmented or annotated."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        else:
            continue
        for target in targets:
            for part in ast.walk(target):          # a, torch.x = ... assigns both
                if isinstance(part, (ast.Attribute, ast.Subscript)) and \
                        isinstance(part.ctx, ast.Store):
                    yield node.lineno, part


def assigned_names(src: Source, target: ast.AST) -> set[str]:
    """The names an assignment rewrites, through aliases: `torch.x = ...` and
    `torch.__dict__[k] = ...` both rewrite torch."""
    if isinstance(target, ast.Subscript):
        target = target.value
        if not (isinstance(target, ast.Attribute) and target.attr == "__dict__"):
            return set()
    return src.names(target) if isinstance(target, ast.Attribute) else set()


def by_line(hit: str) -> tuple[int, str]:
    """`line N: what` in order of N, then of what (a message reads the same every time)."""
    return int(hit.split()[1].rstrip(":")), hit


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
    for line, name, written in src.uses():
        if RAW_BUFFER_ATTRS & set(name.split(".")) or raw_buffer_name(name) or \
                name == "memoryview":
            found.append(f"line {line}: {written}" + "()" * (name == "memoryview"))
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Attribute) and not dotted(node) and \
                node.attr in RAW_BUFFER_ATTRS:       # x.cpu().__dlpack__
            found.append(f"line {node.lineno}: .{node.attr}")
    found += [f"line {n}: imports {full}" for n, full, _ in imports(src.tree)
              if raw_buffer_name(full) or full.rsplit(".", 1)[-1] in RAW_BUFFER_IMPORTS]
    return sorted(set(found), key=by_line)


RAW_BUFFER_IMPORTS = {"ctypeslib", "dlpack", "frombuffer", "from_dlpack"}


def raw_buffer_name(name: str) -> bool:
    return name in RAW_BUFFER_NAMES or name.startswith(("torch.utils.dlpack",
                                                        "numpy.ctypeslib", "np.ctypeslib"))
