"""Who computed the answer: what a candidate's forward dispatched and launched, seen as it ran.

Names lie both ways (a torch op hidden in a submodule passes a name rule; a helper attribute
called `softmax` trips it), so the candidate worker runs each correctness trial under an audit:

* every ATen op the forward dispatches is recorded (a TorchDispatchMode) with the candidate's
  line that led to it; ops that only allocate, move, view, copy or fill are harmless (a cast
  that changes values, float to int, is not), and ops run by Triton's own machinery (its
  autotuner's benchmarking, its interpreter's copies) are not the candidate's. Whose code ran
  is decided by the code object, never by its file name (the candidate's to forge): code that
  existed before the candidate was imported is torch's, Triton's, Python's or kforge's; any
  other (the candidate's module, what it built with `eval`, `exec` or `compile`) is the
  candidate's;
* tensor data taken out of torch into Python (`.numpy()`, `.tolist()`, a storage's items) is
  recorded the same way: what Python computes with it is not a kernel;
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
import gc
import os
import sys
import threading
import types
from collections import Counter

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

# Ops that move, view, allocate or fill memory: a kernel's wrapper may use them freely. Moving
# includes padding (with a constant, reflected or replicated edge), flipping, rolling, windows
# (unfold, im2col), tiling and shuffling: each output element is one input element or a fill.
HARMLESS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros",
    "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full",
    "scalar_tensor", "arange", "fill", "fill_", "zero_", "copy", "copy_", "_copy_from",
    "_copy_from_and_resize", "_to_copy", "clone", "contiguous", "view", "_unsafe_view",
    "reshape", "_reshape_alias", "as_strided", "as_strided_", "expand", "permute", "transpose",
    "transpose_", "t", "t_", "squeeze", "squeeze_", "unsqueeze", "unsqueeze_", "slice",
    "select", "narrow", "narrow_copy", "split", "split_with_sizes", "chunk", "unbind",
    "detach", "detach_", "alias", "lift_fresh", "lift_fresh_copy", "resize_", "resize_as_",
    "set_", "view_as", "flatten", "unflatten", "movedim", "cat", "stack", "item",
    "_local_scalar_dense", "record_stream", "_pin_memory", "is_pinned", "empty_permuted",
    "rand", "randn", "normal_", "uniform_", "random_", "bernoulli_",
    "_has_compatible_shallow_copy_type", "is_same_size", "_nested_tensor_from_mask_left_aligned",
    "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "dim", "size", "stride",
    "numel", "constant_pad_nd", "reflection_pad1d", "reflection_pad2d", "reflection_pad3d",
    "replication_pad1d", "replication_pad2d", "replication_pad3d", "unfold", "im2col", "flip",
    "roll", "rot90", "repeat", "diagonal", "pixel_shuffle", "pixel_unshuffle",
    "channel_shuffle", "view_as_real", "view_as_complex",
})
# Copies of HARMLESS that may convert dtypes as they copy: (source, destination) argument.
# `_to_copy(x, dtype=...)` converts x to the dtype it is given.
COPIES = {"copy": (1, 0), "copy_": (1, 0), "_copy_from": (0, 1), "_copy_from_and_resize": (0, 1)}


def converts_values(raw: str, args: tuple, kwargs: dict) -> bool:
    """Whether this harmless-looking copy converts values to a dtype that changes them: a
    conversion that changes values (float to int truncates, a narrower int wraps, anything to
    bool compares) is compute, `x.to(torch.int32).to(x.dtype)` is trunc."""
    tensors = [a for a in args[:2] if isinstance(a, torch.Tensor)]
    if raw == "_to_copy" and tensors:
        source, target = tensors[0].dtype, kwargs.get("dtype") or tensors[0].dtype
    elif raw in COPIES and len(tensors) == 2:
        source, target = (tensors[i].dtype for i in COPIES[raw])
    else:
        return False
    return changes_values(source, target)


def changes_values(source: torch.dtype, target: torch.dtype) -> bool:
    """A conversion that is itself arithmetic. Floats to floats round, integers to floats
    round at worst: values, not compute. To an integer or bool it truncates, wraps or
    compares; complex to real drops a part."""
    if source == target or source == torch.bool:
        return False
    if target == torch.bool or (source.is_complex and not target.is_complex):
        return True
    if target.is_floating_point or target.is_complex:
        return False
    if source.is_floating_point or source.is_complex:
        return True                               # float -> int: truncation
    try:
        wide, narrow = torch.iinfo(source), torch.iinfo(target)
    except TypeError:                             # not an integer type we know: say so
        return True
    return wide.min < narrow.min or wide.max > narrow.max


def functions_code() -> set:
    """The code of every Python function alive now, with the code nested in it (lambdas,
    generators): read before the candidate is imported, it is code no candidate wrote."""
    found: set = set()
    todo = [o.__code__ for o in gc.get_objects() if type(o) is types.FunctionType]
    while todo:
        code = todo.pop()
        if code not in found:
            found.add(code)
            todo += [c for c in code.co_consts if type(c) is types.CodeType]
    return found


# Code that existed before any candidate: torch's, Python's, NumPy's, Triton's, kforge's. A
# frame running any other code - the candidate's module, what it compiled with eval, exec or
# compile, whatever file name it gave that - is the candidate's. Taken in the fork server
# just before it forks a worker (the walk over every function costs ~0.2 s once; each worker
# inherits it), then in the worker for the modules it imported since, before the candidate is
# imported; after that (LEARNING off) it never grows.
KNOWN_CODE: frozenset = frozenset()
KNOWN_MODULES: frozenset = frozenset()
LEARNING = True


def know_existing_code() -> None:
    global KNOWN_CODE, KNOWN_MODULES
    if not LEARNING:
        return
    if not KNOWN_MODULES:
        KNOWN_CODE = frozenset(functions_code())
    elif set(sys.modules) - KNOWN_MODULES:
        KNOWN_CODE = KNOWN_CODE | modules_code(set(sys.modules) - KNOWN_MODULES)
    KNOWN_MODULES = frozenset(sys.modules)


os.register_at_fork(before=know_existing_code)


ACTIVE: list["Audit"] = []       # the audit watching the forward that runs now, if any
# What this module changes as it runs (integrity checks these for rebinding only; every other
# table here is checked by value too).
LIVE_STATE = ("ACTIVE", "LAUNCHES", "THREAD_COMPUTE", "READING")


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
        is computed with it (`x.numpy()`, `x.tolist()`, `x.storage().tolist()`)."""
        if what not in self.allowed:
            where = self.caller()
            if where is not None:
                self.compute[(what, where)] += 1

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        raw = func.overloadpacket.__name__
        name = raw.rstrip("_") or raw            # add_ is add, done in place
        harmless = (raw in HARMLESS or name in HARMLESS) and \
            not converts_values(raw, args, kwargs or {})
        if not (harmless or self.scope.depth > 0) and \
                not {name, raw, f"aten.{name}", "*"} & self.allowed:
            where = self.caller()
            if where is not None:
                self.compute[(name, where)] += 1
        return func(*args, **(kwargs or {}))

    def caller(self) -> str | None:
        """The candidate's line that led to this op (`line N`, and `through` the first code of
        no module it passed, e.g. what `eval` ran); None when Triton's own code ran it with
        only known code between (the autotuner timing configs, the interpreter's copies).
        Frames are told apart by their code objects: a file name is the candidate's to forge,
        and a name that starts `line ` is only ever the candidate's line."""
        frame = sys._getframe(2)
        through = None
        while frame is not None:
            code = frame.f_code
            if code.co_filename == self.filename:
                return f"line {frame.f_lineno}" + (f" through {through}" if through else "")
            if code in TRITON_CODE:
                if through is None:
                    return None
            elif through is None and code not in KNOWN_CODE:
                through = code_where(code, frame.f_lineno)
            frame = frame.f_back
        return through or "outside any Python frame"


def code_where(code: types.CodeType, line: int | None) -> str:
    """Where a frame of code not in the candidate's file ran, whatever its file is called:
    `'<string>' line 1`, `'helper.py' line 12`."""
    name = os.path.basename(code.co_filename) or code.co_filename
    return f"{name!r} line {line or 0}"


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
    """Report to the active audit every way tensor data leaves torch for Python: a tensor's
    `.numpy()`, `.tolist()`, `__array__` and `__dlpack__` (NumPy on a DLPack view), and a
    storage's items (`x.storage().tolist()`, `x.untyped_storage()[i]`, iterating it)."""
    readers = [(torch.Tensor, "Tensor", ("numpy", "tolist", "__array__", "__dlpack__")),
               (torch.storage.TypedStorage, "Storage", ("tolist", "__getitem__", "__iter__")),
               (torch.storage.UntypedStorage, "Storage", ("__getitem__",)),
               (torch.storage._StorageBase, "Storage", ("tolist", "__iter__"))]
    for cls, kind, names in readers:
        for name in names:
            setattr(cls, name, watched_reader(getattr(cls, name), f"{kind}.{name.strip('_')}"))


READING: list[bool] = [False]     # inside a watched reader: the readers it calls are its own
HOST_READS = ("Tensor.", "Storage.")      # how the audit names what the readers report


def watched_reader(original, what: str):
    def watched(self, *args, **kwargs):
        if not ACTIVE or READING[0]:
            return original(self, *args, **kwargs)
        ACTIVE[-1].host(what)
        READING[0] = True
        try:
            return original(self, *args, **kwargs)
        finally:
            READING[0] = False
    return watched


def count_launches() -> None:
    """Count the candidate's own kernel launches. Installed in the worker before the candidate
    is imported (and before the integrity snapshot, so these wrappers are the originals)."""
    global LEARNING
    watch_host_copies()
    watch_threads()
    from ...runtime import native
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
    know_existing_code()           # this worker's own imports: still no candidate's code
    LEARNING = False


# --- Triton's own code, by identity ---------------------------------------------------------------

TRITON_CODE: set = set()


def code_objects(package: str) -> set:
    """Every code object of the package's loaded modules: their functions, methods, and the
    functions nested in them."""
    return modules_code({name for name in sys.modules
                         if name == package or name.startswith(package + ".")})


def modules_code(names: set[str]) -> set:
    """Every code object of these modules' functions, classes' methods and properties, and the
    code nested in them; read off the modules' namespaces by type, never by attribute (a
    module's __getattr__ could run anything)."""
    found: set = set()

    def add(code) -> None:
        if type(code) is types.CodeType and code not in found:
            found.add(code)
            for const in code.co_consts:
                add(const)

    def visit(value, depth: int = 0) -> None:
        kind = type(value)
        if kind in (staticmethod, classmethod, types.MethodType):
            value, kind = value.__func__, type(value.__func__)
        if kind is types.FunctionType:
            add(value.__code__)
            visit(vars(value).get("__wrapped__"), depth)
        elif kind is property:
            for fn in (value.fget, value.fset, value.fdel):
                visit(fn, depth)
        elif isinstance(value, type) and depth < 2:
            for member in list(vars(value).values()):
                visit(member, depth + 1)

    for name in names:
        module = sys.modules.get(name)
        if isinstance(module, types.ModuleType):
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
HANDLING = frozenset({
    "__get__", "__set__", "data_ptr", "is_contiguous", "element_size", "__len__", "__getitem__",
    "__setitem__", "is_floating_point", "storage_offset", "untyped_storage", "cpu", "cuda", "to",
    "type", "get_device", "__format__", "__repr__", "__hash__", "__bool__", "__index__",
    "__int__", "__float__", "requires_grad_", "__iter__", "float", "double", "half", "bfloat16",
    "long", "int", "_parse_to",
    # grad mode on or off (nn.init's no_grad in every nn.LayerNorm/Linear constructor)
    "_set_grad_enabled", "set_grad_enabled",
})


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
    compute = [{"op": op, "where": where, "calls": n, "host": op.startswith(HOST_READS)}
               for (op, where), n in audit.compute.most_common(20)]
    return {"compute": compute, "launches": launched}
