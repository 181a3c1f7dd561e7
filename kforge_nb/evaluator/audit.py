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

The parent turns the record into a verdict: compute outside `--allow` -> `rejected`, naming the
op and the line; no kernel of its own at all -> `rejected`.
"""
from __future__ import annotations

import os
import sys
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
        """The candidate's line that led to this op; None when Triton's own code ran it."""
        triton_dir = package_dir("triton")
        frame = sys._getframe(2)
        while frame is not None:
            path = frame.f_code.co_filename
            if path == self.filename:
                return f"line {frame.f_lineno}"
            if triton_dir and path.startswith(triton_dir):
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
    """Report `Tensor.numpy()`, `.tolist()` and `__array__` calls to the active audit."""
    for name in ("numpy", "tolist", "__array__"):
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
    from ..runtime import native
    native.on_call = lambda: LAUNCHES.__setitem__("native", LAUNCHES["native"] + 1)
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


def wrap_method(cls, name: str, kind: str) -> None:
    original = getattr(cls, name)
    if getattr(original, "_kforge_counted", False):
        return

    def run(self, *args, **kwargs):
        LAUNCHES[kind] += 1
        return original(self, *args, **kwargs)
    run._kforge_counted = True
    setattr(cls, name, run)


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
