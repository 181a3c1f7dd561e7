"""Build native source into a shared library with a C ABI and call it with tensors.

This is the fast path behind the `cpp` and `cuda` targets. torch's `load_inline` builds a
Python extension (pybind11 + torch headers) and takes ~30 s for a trivial op on a small
machine; a plain `extern "C"` shared library built by one compiler call takes well under a
second, and is cached by the hash of (compiler, flags, source).

The calling convention is read off the source itself: every `extern "C"` function becomes a
Python callable; pointer parameters take contiguous tensors of the matching dtype, integer and
floating parameters take Python numbers, a `cudaStream_t` parameter is filled with torch's
current stream.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch
from torch._C._autograd import _profiler_enabled as profiler_enabled


class CompileError(RuntimeError):
    """The compiler rejected the source. `log` is its full output, `line` the first error line."""

    def __init__(self, compiler: str, log: str, source: str):
        self.log, self.source = log, source
        self.line, self.source_line = first_error_line(log, source)
        where = f" at line {self.line}: {self.source_line.strip()}" if self.line else ""
        first = next((l for l in log.splitlines() if "error" in l.lower()), log.strip()[:300])
        super().__init__(f"{compiler} failed{where}\n{first}")


def cache_dir() -> Path:
    root = Path(os.environ.get("KFORGE_CACHE", Path.home() / ".cache" / "kforge-nb"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def first_error_line(log: str, source: str) -> tuple[int | None, str]:
    """The first `file:LINE:COL: error` (gcc) or `file(LINE): error` (nvcc) in a compiler log."""
    match = re.search(r":(\d+):\d+: (?:fatal )?error", log) or re.search(r"\((\d+)\): error", log)
    if not match:
        return None, ""
    line = int(match.group(1))
    lines = source.splitlines()
    return line, lines[line - 1] if 0 < line <= len(lines) else ""


@lru_cache(maxsize=None)
def compiler_version(compiler: str) -> str:
    try:
        out = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30)
        return out.stdout
    except FileNotFoundError:
        raise CompileError(compiler, f"{compiler}: command not found; install it or set the "
                           "compiler's environment variable (CXX for cpp, NVCC for cuda)", "")


def build_shared_library(source: str, compiler: str, flags: list[str], suffix: str) -> Path:
    """Compile `source` once per (compiler, flags, source); return the cached library's path."""
    key = hashlib.sha256("\0".join([compiler_version(compiler), *flags, source]).encode())
    folder = cache_dir() / "native"
    folder.mkdir(parents=True, exist_ok=True)
    library = folder / f"{key.hexdigest()[:24]}.so"
    if library.exists():
        return library
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        src = Path(tmp) / f"kernel{suffix}"
        src.write_text(source)
        out = Path(tmp) / "lib.so"
        proc = subprocess.run([compiler, *flags, str(src), "-o", str(out)],
                              capture_output=True, text=True,
                              env={**os.environ, "LC_ALL": "C"})  # plain ASCII messages
        log = (proc.stdout + proc.stderr).replace(str(src), f"kernel{suffix}")
        if proc.returncode != 0:
            raise CompileError(Path(compiler).name, log, source)
        os.replace(out, library)   # atomic: a crash never leaves half a library in the cache
    return library


# --- the C ABI --------------------------------------------------------------------------------

POINTER_DTYPES = {
    "float": torch.float32, "double": torch.float64, "int": torch.int32, "int32_t": torch.int32,
    "int64_t": torch.int64, "long": torch.int64, "int16_t": torch.int16, "int8_t": torch.int8,
    "uint8_t": torch.uint8, "bool": torch.bool, "half": torch.float16, "__half": torch.float16,
    "__nv_bfloat16": torch.bfloat16, "void": None,
}
SCALAR_CTYPES = {
    "int": ctypes.c_int, "int32_t": ctypes.c_int32, "unsigned": ctypes.c_uint,
    "long": ctypes.c_long, "int64_t": ctypes.c_int64, "long long": ctypes.c_longlong,
    "size_t": ctypes.c_size_t, "uint32_t": ctypes.c_uint32, "uint64_t": ctypes.c_uint64,
    "float": ctypes.c_float, "double": ctypes.c_double, "bool": ctypes.c_bool,
}
EXTERN_C = re.compile(r'extern\s+"C"\s+(?:__host__\s+)?([\w\s\*]+?)\s*\b(\w+)\s*\(([^)]*)\)\s*\{')


@dataclass(frozen=True)
class Param:
    name: str
    kind: str                      # "tensor", "scalar" or "stream"
    ctype: object = None
    dtype: torch.dtype | None = None


def parse_signatures(source: str) -> dict[str, tuple[str, list[Param]]]:
    """Map each `extern "C"` function name to (return type, parameters)."""
    functions = {}
    for ret, name, params in EXTERN_C.findall(source):
        parsed = []
        for i, decl in enumerate(p.strip() for p in params.split(",") if p.strip()):
            decl = re.sub(r"\b(const|__restrict__|__restrict|restrict|volatile)\b", " ", decl)
            decl = re.sub(r"\s+", " ", decl).strip()
            if decl == "void":
                continue
            match = re.match(r"(.+?)\s*(\*?)\s*(\w+)$", decl.replace(" *", "*").replace("* ", "*"))
            if not match:
                raise TypeError(f"{name}: cannot read parameter {decl!r}")
            base, star, pname = match.group(1).strip(), match.group(2), match.group(3)
            if base.endswith("*"):
                base, star = base[:-1].strip(), "*"
            if star:
                if base not in POINTER_DTYPES:
                    raise TypeError(f"{name}: pointer parameter {pname!r} has unsupported element "
                                    f"type {base!r}; use one of {sorted(POINTER_DTYPES)}")
                parsed.append(Param(pname, "tensor", ctypes.c_void_p, POINTER_DTYPES[base]))
            elif base == "cudaStream_t":
                parsed.append(Param(pname, "stream", ctypes.c_void_p))
            elif base in SCALAR_CTYPES:
                parsed.append(Param(pname, "scalar", SCALAR_CTYPES[base]))
            else:
                raise TypeError(f"{name}: parameter {pname!r} has unsupported type {base!r}; "
                                f"use pointers to {sorted(POINTER_DTYPES)} or scalars "
                                f"{sorted(SCALAR_CTYPES)}")
        functions[name] = (ret.strip(), parsed)
    return functions


def on_call() -> None:
    """Called before each native call; the evaluator's worker counts launches through it."""


class NativeFunction:
    """A Python callable over one `extern "C"` function; checks every tensor it is handed."""

    def __init__(self, library: ctypes.CDLL, name: str, ret: str, params: list[Param],
                 device: str):
        self.name, self.params, self.device = name, params, device
        self.fn = getattr(library, name)
        self.fn.argtypes = [p.ctype for p in params]
        self.fn.restype = SCALAR_CTYPES.get(ret) if ret != "void" else None
        self.user_params = [p for p in params if p.kind != "stream"]
        self.label = f"{device}::{name}"

    def __call__(self, *args):
        if len(args) != len(self.user_params):
            names = ", ".join(p.name for p in self.user_params)
            raise TypeError(f"{self.name}() takes {len(self.user_params)} arguments "
                            f"({names}), got {len(args)}")
        on_call()
        values, given = [], iter(args)
        for p in self.params:
            if p.kind == "stream":
                values.append(torch.cuda.current_stream().cuda_stream)
            elif p.kind == "tensor":
                values.append(self._pointer(p, next(given)))
            else:
                values.append(next(given))
        if not profiler_enabled():    # the annotation costs ~3 us a call: only when it is seen
            return self.fn(*values)
        with torch.profiler.record_function(self.label):
            return self.fn(*values)

    def _pointer(self, p: Param, value) -> int:
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{self.name}(): argument {p.name!r} is a pointer; pass a tensor, "
                            f"not {type(value).__name__}")
        if p.dtype is not None and value.dtype != p.dtype:
            raise TypeError(f"{self.name}(): argument {p.name!r} expects {p.dtype}, "
                            f"got a {value.dtype} tensor")
        if not value.is_contiguous():
            raise ValueError(f"{self.name}(): argument {p.name!r} is not contiguous; "
                             f"pass t.contiguous()")
        if value.device.type != self.device:
            raise ValueError(f"{self.name}(): argument {p.name!r} is on {value.device}, "
                             f"the kernel runs on {self.device}")
        return value.data_ptr()


class NativeModule:
    """The loaded library: each `extern "C"` function is an attribute."""

    def __init__(self, path: Path, source: str, device: str):
        self.path = path
        self._library = ctypes.CDLL(str(path))
        self._functions = {name: NativeFunction(self._library, name, ret, params, device)
                           for name, (ret, params) in parse_signatures(source).items()}
        if not self._functions:
            raise CompileError("loader", 'the source defines no `extern "C"` function; '
                               'mark each function Python calls with extern "C"', source)

    def __getattr__(self, name: str) -> NativeFunction:
        try:
            return self.__dict__["_functions"][name]
        except KeyError:
            known = ", ".join(self.__dict__.get("_functions", {})) or "none"
            raise AttributeError(f'no extern "C" function {name!r} (defined: {known})') from None
