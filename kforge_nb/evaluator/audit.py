"""Who computed the answer: what a candidate's forward dispatched and launched, seen as it ran.

Names lie both ways (a torch op hidden in a submodule passes a name rule; a helper attribute
called `softmax` trips it), so the candidate worker runs each correctness trial under an audit:

* every ATen op the forward dispatches is recorded (a TorchDispatchMode) with the candidate's
  line that led to it; ops that only allocate, view, copy or fill are harmless, and ops run by
  Triton's own machinery (its autotuner's benchmarking, its interpreter's copies) are not the
  candidate's;
* every kernel launch of the candidate's own is counted: Triton launches, calls into libraries
  built by `kforge_nb.runtime` (cpp, cuda), functions of a torch extension built by
  `load_inline`/`load`, Metal kernels from `torch.mps.compile_shader`.

Every other call of candidate code is watched too, so that no call is a safe moment to cheat:
construction, the warm-up, every timed call and the profiled call run under `Calls`, a cheap
record of the torch functions called (~1.5 us a call, where the trials' dispatch audit costs
~11 us an op and would distort timings). A torch function the timed calls reach that no audited
trial reached is named in the reply (`unaudited`), and the parent rejects it. Threads the
candidate starts run under a dispatch audit of their own for their whole life.

The parent turns the record into a verdict: compute outside `--allow` -> `rejected`, naming the
op and the line; no kernel of its own at all -> `rejected`. All of this runs in the candidate's
process and is a tripwire, not a proof: the verdict's proof is the judge's comparison of the
bytes handed back and the parent's own clock.
"""
from __future__ import annotations

import _thread
import os
import sys
import threading
import types
from collections import Counter

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

# Ops that move, view, allocate or fill memory: a kernel's wrapper may use them freely.
HARMLESS = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros",
    "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full",
    "scalar_tensor", "arange", "fill", "fill_", "zero_", "copy", "copy_", "_copy_from",
    "_copy_from_and_resize", "_to_copy", "clone", "contiguous", "view", "_unsafe_view",
    "reshape", "_reshape_alias", "as_strided", "as_strided_", "expand", "permute", "transpose",
    "transpose_", "t", "t_", "squeeze", "squeeze_", "unsqueeze", "unsqueeze_", "slice",
    "select", "narrow", "split", "split_with_sizes", "chunk", "unbind", "detach", "detach_",
    "alias", "lift_fresh", "lift_fresh_copy", "resize_", "resize_as_", "set_", "view_as",
    "flatten", "unflatten", "movedim", "cat", "stack", "item", "_local_scalar_dense",
    "record_stream", "_pin_memory", "is_pinned", "empty_permuted", "rand", "randn",
    "normal_", "uniform_", "random_", "bernoulli_", "_has_compatible_shallow_copy_type",
    "is_same_size", "_nested_tensor_from_mask_left_aligned", "sym_size", "sym_stride",
    "sym_numel", "sym_storage_offset", "dim", "size", "stride", "numel",
}

TORCH_DIR = os.path.dirname(torch.__file__)
HERE = os.path.dirname(os.path.dirname(__file__))   # kforge_nb/: our own harness frames


def package_dir(name: str) -> str | None:
    module = sys.modules.get(name)
    return os.path.dirname(module.__file__) if module and getattr(module, "__file__", None) else None


ACTIVE: list["Audit"] = []       # the audit watching the forward that runs now, if any


class Audit(TorchDispatchMode):
    """Record compute ops (with the candidate's line) while the candidate's forward runs."""

    def __init__(self, filename: str, allowed: frozenset[str] = frozenset()):
        super().__init__()
        self.filename, self.allowed = filename, allowed
        self.compute: Counter = Counter()        # (op, "line N: text" or where) -> calls
        self.scope = AllowedScope({leaf(a) for a in allowed})

    def __enter__(self):
        ACTIVE.append(self)
        self.scope.__enter__()
        return super().__enter__()

    def __exit__(self, *exc):
        ACTIVE.remove(self)
        out = super().__exit__(*exc)
        self.scope.__exit__(*exc)
        return out

    def host(self, what: str) -> None:
        """Tensor data taken out of torch into Python or NumPy, where no dispatch sees what
        is computed with it (`x.numpy()`, `x.tolist()`)."""
        if what not in self.allowed:
            where = self.caller()
            if where is not None:
                self.compute[(what, where)] += 1

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        raw = func.overloadpacket.__name__
        name = raw.rstrip("_") or raw            # add_ is add, done in place
        harmless = raw in HARMLESS or name in HARMLESS or self.scope.depth > 0
        if not harmless and not {name, raw, f"aten.{name}", "*"} & self.allowed:
            where = self.caller()
            if where is not None:
                self.compute[(name, where)] += 1
        return func(*args, **(kwargs or {}))

    def caller(self) -> str | None:
        """The candidate's line that led to this op; None when Triton's own code ran it
        (known by the code object itself, taken from Triton's modules before the candidate was
        imported: a file name is the candidate's to forge)."""
        frame = sys._getframe(2)
        while frame is not None:
            path = frame.f_code.co_filename
            if path == self.filename:
                return f"line {frame.f_lineno}"
            if frame.f_code in TRITON_CODE:
                return None        # the autotuner timing configs, the interpreter's copies
            if not (path.startswith(TORCH_DIR) or path.startswith(HERE) or path.startswith("<")):
                return f"{os.path.basename(path)}:{frame.f_lineno}"
            frame = frame.f_back
        return "outside any Python frame"


def leaf(token: str) -> str:
    """`F.linear`, `torch.nn.functional.linear`, `Tensor.softmax` -> `linear`, `softmax`."""
    return token.rsplit(".", 1)[-1].strip("_")


class AllowedScope(TorchFunctionMode):
    """While a torch function the user (or the agent, saying so) allowed runs, whatever it
    dispatches is allowed too: `--allow linear` covers the addmm that F.linear becomes."""

    def __init__(self, leaves: set[str]):
        super().__init__()
        self.leaves, self.depth = leaves, 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        allowed = leaf(getattr(func, "__name__", "")) in self.leaves
        self.depth += allowed
        try:
            return func(*args, **(kwargs or {}))
        finally:
            self.depth -= allowed


# --- launches -----------------------------------------------------------------------------------

LAUNCHES: Counter = Counter()


def watch_host_copies() -> None:
    """Report `Tensor.numpy()`, `.tolist()`, `__array__` and `__dlpack__` calls (NumPy on a
    DLPack view) to the active audit."""
    for name in ("numpy", "tolist", "__array__", "__dlpack__"):
        original = getattr(torch.Tensor, name)

        def watched(self, *args, _original=original, _name=name, **kwargs):
            if ACTIVE:
                ACTIVE[-1].host(f"Tensor.{_name.strip('_')}")
            return _original(self, *args, **kwargs)
        setattr(torch.Tensor, name, watched)


def count_launches() -> None:
    """Count the candidate's own kernel launches. Installed in the worker before the candidate
    is imported (and before the integrity snapshot, so these wrappers are the originals)."""
    watch_host_copies()
    watch_threads()
    from ..runtime import native
    native.on_call = lambda: LAUNCHES.__setitem__("native", LAUNCHES["native"] + 1)
    wrap_method(native.NativeFunction, "__call__", None)
    try:
        import triton.runtime.jit as jit
        wrap_method(jit.JITFunction, "run", "triton")
    except ImportError:
        pass
    try:
        import triton.runtime.interpreter as interpreter
        wrap_method(interpreter.InterpretedFunction, "run", "triton")
    except (ImportError, AttributeError):
        pass
    from torch.utils import cpp_extension
    for name in ("load_inline", "load"):
        original = getattr(cpp_extension, name)
        setattr(cpp_extension, name, counted_extension(original))
    mps = getattr(torch, "mps", None)
    if mps is not None and hasattr(mps, "compile_shader"):
        mps.compile_shader = counted_extension(mps.compile_shader, kind="metal")
    TRITON_CODE.update(code_objects("triton"))


# --- Triton's own code, by identity ---------------------------------------------------------------

TRITON_CODE: set = set()


def code_objects(package: str) -> set:
    """Every code object of the package's loaded modules: their functions, methods, and the
    functions nested in them."""
    found: set = set()

    def add(code) -> None:
        if isinstance(code, types.CodeType) and code not in found:
            found.add(code)
            for const in code.co_consts:
                add(const)

    def visit(value, depth: int = 0) -> None:
        value = getattr(value, "__func__", value)           # static and class methods
        if isinstance(value, types.FunctionType):
            add(value.__code__)
        elif isinstance(value, property):
            for fn in (value.fget, value.fset, value.fdel):
                visit(fn)
        elif isinstance(value, type) and depth < 2:
            for member in list(vars(value).values()):
                visit(member, depth + 1)
        wrapped = getattr(value, "__wrapped__", None) if not isinstance(value, type) else None
        if isinstance(wrapped, types.FunctionType):
            add(wrapped.__code__)

    for name, module in list(sys.modules.items()):
        if module is None or not (name == package or name.startswith(package + ".")):
            continue
        for value in list(vars(module).values()):
            visit(value)
    return found


# --- threads -------------------------------------------------------------------------------------

THREAD_COMPUTE: list[str] = []      # what candidate threads computed with torch, until reported
_THREAD_GUARD = threading.Lock()


def watch_threads() -> None:
    """Threads started from Python run their target under a dispatch audit of their own: torch
    compute on a thread is never the candidate's kernel (dispatch modes are per thread, so the
    forward's audit would not see it)."""
    original = _thread.start_new_thread

    def start_new_thread(function, args=(), kwargs=None, _original=original):
        def audited(*a, **k):
            watch = Audit("", frozenset())
            try:
                with watch:
                    return function(*a, **k)
            finally:
                with _THREAD_GUARD:
                    THREAD_COMPUTE.extend(f"aten.{op} on a thread ({where})"
                                          for (op, where), _ in watch.compute.most_common(5))
        return _original(audited, args, kwargs or {})
    _thread.start_new_thread = start_new_thread
    for name in ("_start_new_thread", "_start_joinable_thread"):
        if getattr(threading, name, None) is original:
            setattr(threading, name, start_new_thread)


def thread_compute() -> list[str]:
    with _THREAD_GUARD:
        taken = list(THREAD_COMPUTE)
        THREAD_COMPUTE.clear()
    return taken


# --- every other call ----------------------------------------------------------------------------

# torch functions that ask about a tensor or hand it on, as torch's Python API names them
HANDLING = {"__get__", "__set__", "data_ptr", "is_contiguous", "element_size", "__len__",
            "__getitem__", "__setitem__", "is_floating_point", "storage_offset",
            "untyped_storage", "cpu", "cuda", "to", "type", "get_device", "__format__",
            "__repr__", "__hash__", "__bool__", "__index__", "__int__", "__float__",
            "requires_grad_", "__iter__", "float", "double", "half", "bfloat16", "long", "int",
            "_parse_to"}


class Calls(TorchFunctionMode):
    """The torch functions called while it is active (a set: cheap enough for timed calls)."""

    def __init__(self):
        super().__init__()
        self.seen: set = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.seen.add(func)
        return func(*args, **(kwargs or {}))


def function_name(func) -> str:
    """`torch.relu`, `torch.Tensor.mm`: as a person writes it."""
    try:
        from torch.overrides import resolve_name
        name = resolve_name(func)
        if name:
            return name
    except Exception:
        pass
    module = getattr(func, "__module__", None) or ""
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
    return f"{module}.{name}" if module and not name.startswith(module) else name


def unaudited(seen: set, audited: set, allowed: frozenset[str]) -> list[str]:
    """Torch functions called outside the trials that no audited trial called, less the ones
    that only allocate, view or ask about a tensor, and those the user allowed."""
    leaves = {leaf(a) for a in allowed}
    out = []
    for func in seen - audited:
        raw = getattr(func, "__name__", "") or ""
        name = raw.rstrip("_") or raw
        if {raw, name} & (HARMLESS | HANDLING) or leaf(raw) in leaves or "*" in allowed or \
                raw.startswith("_record_function"):     # the profiler's own annotations
            continue
        out.append(function_name(func))
    return sorted(out)


def wrap_method(cls, name: str, kind: str | None) -> None:
    """Count a launcher's calls (`kind`), and run it with torch-function handling off: the
    launcher's own checks of its arguments (data_ptr, dtype, is_contiguous) are kforge's or
    Triton's code, not the candidate's, and would cost the timed calls ~1 us each under `Calls`."""
    original = getattr(cls, name)
    if getattr(original, "_kforge_counted", False):
        return

    def run(self, *args, **kwargs):
        if kind:
            LAUNCHES[kind] += 1
        with QUIET():
            return original(self, *args, **kwargs)
    run._kforge_counted = True
    setattr(cls, name, run)


QUIET = torch._C.DisableTorchFunction


class CountedLibrary:
    """A built extension or shader library whose functions count their calls."""

    def __init__(self, library, kind: str):
        self._library, self._kind = library, kind

    def __getattr__(self, name):
        value = getattr(self._library, name)
        if not callable(value) or name.startswith("__"):
            return value

        def call(*args, **kwargs):
            LAUNCHES[self._kind] += 1
            return value(*args, **kwargs)
        return call

    def __dir__(self):
        return dir(self._library)


def counted_extension(builder, kind: str = "extension"):
    def build(*args, **kwargs):
        return CountedLibrary(builder(*args, **kwargs), kind)
    build.__wrapped__ = builder
    return build


def report(audit: Audit, launches_before: Counter) -> dict:
    launched = {k: v - launches_before.get(k, 0) for k, v in LAUNCHES.items()
                if v - launches_before.get(k, 0) > 0}
    compute = [{"op": op, "where": where, "calls": n, "host": op.startswith("Tensor.")}
               for (op, where), n in audit.compute.most_common(20)]
    return {"compute": compute, "launches": launched}
