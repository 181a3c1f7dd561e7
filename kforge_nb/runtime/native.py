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

def _dtype(name: str) -> torch.dtype | None:
    return getattr(torch, name, None)


POINTER_DTYPES = {
    "float": torch.float32, "double": torch.float64, "int": torch.int32, "int32_t": torch.int32,
    "int64_t": torch.int64, "long": torch.int64, "long long": torch.int64, "int16_t": torch.int16,
    "short": torch.int16, "int8_t": torch.int8, "signed char": torch.int8, "char": torch.int8,
    "uint8_t": torch.uint8, "unsigned char": torch.uint8, "bool": torch.bool,
    "half": torch.float16, "__half": torch.float16, "__nv_bfloat16": torch.bfloat16,
    "void": None,
    **{k: v for k, v in {"uint16_t": _dtype("uint16"), "uint32_t": _dtype("uint32"),
                         "unsigned": _dtype("uint32"), "uint64_t": _dtype("uint64"),
                         "unsigned long": _dtype("uint64"),
                         "unsigned long long": _dtype("uint64")}.items() if v is not None},
}
SCALAR_CTYPES = {
    "int": ctypes.c_int, "int32_t": ctypes.c_int32, "unsigned": ctypes.c_uint,
    "long": ctypes.c_long, "int64_t": ctypes.c_int64, "long long": ctypes.c_longlong,
    "unsigned long": ctypes.c_ulong, "unsigned long long": ctypes.c_ulonglong,
    "short": ctypes.c_short, "unsigned short": ctypes.c_ushort, "int16_t": ctypes.c_int16,
    "uint16_t": ctypes.c_uint16, "int8_t": ctypes.c_int8, "uint8_t": ctypes.c_uint8,
    "size_t": ctypes.c_size_t, "ssize_t": ctypes.c_ssize_t, "ptrdiff_t": ctypes.c_ssize_t,
    "intptr_t": ctypes.c_ssize_t, "uintptr_t": ctypes.c_size_t,
    "uint32_t": ctypes.c_uint32, "uint64_t": ctypes.c_uint64,
    "float": ctypes.c_float, "double": ctypes.c_double, "bool": ctypes.c_bool,
}
# Words that say nothing about a parameter's or a result's type: qualifiers, storage,
# CUDA/compiler decorations.
QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "static", "inline",
              "__inline__", "__forceinline__", "__host__", "__noinline__", "constexpr",
              "register", "struct", "typename", "noexcept", "extern", "__device__"}
DECORATIONS = {"__attribute__", "__declspec", "__launch_bounds__", "alignas", "__align__"}
C_TYPE_KEYWORDS = {"int", "long", "short", "char", "float", "double", "bool", "unsigned",
                   "signed", "void"}
# How C spells one type several ways: each spelling -> the key used above.
SPELLINGS = {
    "signed": "int", "signed int": "int", "unsigned int": "unsigned", "long int": "long",
    "signed long": "long", "long long int": "long long", "signed long long": "long long",
    "unsigned long int": "unsigned long", "unsigned long long int": "unsigned long long",
    "short int": "short", "signed short": "short", "unsigned short int": "unsigned short",
    "long unsigned int": "unsigned long", "long unsigned": "unsigned long",
}


@dataclass(frozen=True)
class Param:
    name: str
    kind: str                      # "tensor", "scalar" or "stream"
    ctype: object = None
    dtype: torch.dtype | None = None


def _without_directives(text: str) -> str:
    """Preprocessor lines (`#include`, `#ifdef __cplusplus`, continued `#define`s) blanked."""
    return re.sub(r"(?m)^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", lambda m: re.sub(r"[^\n]", " ", m[0]),
                  text)


class _Token:
    def __init__(self, kind: str, text: str, line: int):
        self.kind, self.text, self.line = kind, text, line


SIMPLE_TOKEN = re.compile(r"""(?P<comment>//[^\n]*|/\*.*?(?:\*/|$))|(?P<string>"(?:\\.|[^"\\\n])*")|"""
                          r"""(?P<char>'(?:\\.|[^'\\\n])*')|(?P<ident>[A-Za-z_]\w*)|"""
                          r"""(?P<number>\.?\d[\w.']*)|(?P<punct>::|\[\[|\]\]|\S)""", re.S)


def _tokens(text: str) -> list:
    """C++ tokens, comments dropped: kforge_nb.cpp_source's tokenizer (the one the guardrails
    read), or, in an exported kernel file where only this runtime is embedded, a plain one."""
    try:
        from ..cpp_source import cpp_tokens
    except ImportError:
        out = []
        for m in SIMPLE_TOKEN.finditer(text):
            if m.lastgroup != "comment":
                out.append(_Token(m.lastgroup, m.group(0), text.count("\n", 0, m.start()) + 1))
        return out
    return cpp_tokens(text)


def _matching(tokens: list, i: int) -> int:
    """Index of the bracket closing the one at tokens[i]."""
    pairs = {"(": ")", "{": "}", "[": "]", "[[": "]]"}
    opening, depth = tokens[i].text, 0
    for j in range(i, len(tokens)):
        if tokens[j].text == opening:
            depth += 1
        elif tokens[j].text == pairs[opening]:
            depth -= 1
            if depth == 0:
                return j
    return len(tokens) - 1


def _type_words(tokens: list) -> tuple[list[str], int, list]:
    """A declaration's type words (qualifiers, attributes and `std::` dropped), its number of
    `*`, and the tokens left over (the name, `&`, `[]`, a default value)."""
    words, stars, rest, i = [], 0, [], 0
    while i < len(tokens):
        t = tokens[i]
        if t.text == "=":                      # a default value
            break
        if t.text in DECORATIONS and i + 1 < len(tokens) and tokens[i + 1].text == "(":
            i = _matching(tokens, i + 1) + 1
            continue
        if t.text == "[[":
            i = _matching(tokens, i) + 1
            continue
        if t.text == "std" and i + 1 < len(tokens) and tokens[i + 1].text == "::":
            i += 2
            continue
        if t.text == "::":
            i += 1
            continue
        if t.text in QUALIFIERS:
            pass
        elif t.text == "*":
            stars += 1
        elif t.kind == "ident":
            words.append(t.text)
        else:
            rest.append(t)
        i += 1
    return words, stars, rest


def _normalise(words: list[str]) -> str:
    name = " ".join(words)
    return SPELLINGS.get(name, name)


def _parse_param(fn: str, i: int, tokens: list) -> Param | None:
    words, stars, rest = _type_words(tokens)
    text = " ".join(t.text for t in tokens)
    if not words:
        raise TypeError(f"{fn}: cannot read parameter {text!r}")
    if any(t.text in ("[", "]") for t in rest):       # `float x[]` is a pointer
        stars += 1
        rest = [t for t in rest if t.text not in ("[", "]") and t.kind != "number"]
    if rest:
        raise TypeError(f"{fn}: cannot read parameter {text!r} (references, arrays of arrays "
                        "and function pointers are not passed from Python)")
    type_words, name = words, f"arg{i}"          # a prototype may leave a parameter unnamed
    if len(words) > 1 and words[-1] not in C_TYPE_KEYWORDS:
        type_words, name = words[:-1], words[-1]
    base = _normalise(type_words)
    if base == "void" and not stars:
        return None
    if stars > 1:
        raise TypeError(f"{fn}: parameter {name!r} is a pointer to a pointer; pass tensors "
                        f"as pointers to {sorted(k for k in POINTER_DTYPES if k != 'void')}")
    if stars:
        if base not in POINTER_DTYPES:
            raise TypeError(f"{fn}: pointer parameter {name!r} has unsupported element "
                            f"type {base!r}; use one of {sorted(POINTER_DTYPES)}")
        return Param(name, "tensor", ctypes.c_void_p, POINTER_DTYPES[base])
    if base == "cudaStream_t":
        return Param(name, "stream", ctypes.c_void_p)
    if base in SCALAR_CTYPES:
        return Param(name, "scalar", SCALAR_CTYPES[base])
    raise TypeError(f"{fn}: parameter {name!r} has unsupported type {base!r}; "
                    f"use pointers to {sorted(POINTER_DTYPES)} or scalars "
                    f"{sorted(SCALAR_CTYPES)}")


def _declaration(tokens: list, i: int) -> tuple[int, dict | None]:
    """Read one declaration from tokens[i]: (index just past it, the function it declares as
    {name, ret, params, body, kernel} or None when it declares no function)."""
    head, j = [], i
    while j < len(tokens):
        t = tokens[j].text
        if t == ";":
            j += 1
            break
        if t == "}":                          # the end of an extern "C" { } block
            break
        if t in ("(", "[", "[["):
            end = _matching(tokens, j)
            head += tokens[j:end + 1]
            j = end + 1
            continue
        if t == "{":
            end = _matching(tokens, j)
            has_body = any(x.text == "(" for x in head)
            j = end + 1
            if has_body:
                return j, _function(head, body=True)
            continue                          # a struct or an initialiser: not a function
        head.append(tokens[j])
        j += 1
    return j, _function(head, body=False)


def _function(head: list, body: bool) -> dict | None:
    k = 0
    while k < len(head):                      # the first `name (` that is not a decoration
        t = head[k]
        if t.text in DECORATIONS or t.text in ("[[",):
            k = _matching(head, k + 1 if t.text != "[[" else k) + 1
            continue
        if t.kind == "ident" and k + 1 < len(head) and head[k + 1].text == "(":
            close = _matching(head, k + 1)
            words, stars, _ = _type_words(head[:k])
            # a __global__ kernel is launched by the host code; a static function is not
            # exported: neither is a function Python calls
            kernel = any(x.text in ("__global__", "static") for x in head[:k])
            ret = _normalise([w for w in words if w != "__global__"]) + "*" * stars
            return {"name": t.text, "ret": ret, "params": head[k + 2:close], "body": body,
                    "kernel": kernel}
        k += 1
    return None


def _split_params(tokens: list) -> list[list]:
    parts, current, depth = [], [], 0
    for t in tokens:
        if t.text in ("(", "[", "{", "<"):
            depth += 1
        elif t.text in (")", "]", "}", ">"):
            depth -= 1
        if t.text == "," and depth == 0:
            parts.append(current)
            current = []
        else:
            current.append(t)
    if current:
        parts.append(current)
    return parts


def parse_signatures(source: str, unreadable: dict[str, str] | None = None
                     ) -> dict[str, tuple[str, list[Param]]]:
    """Map each `extern "C"` function name to (return type, parameters).

    Read off the source's tokens (comments and preprocessor lines do not count): a single
    `extern "C" T f(...) {...}`, or every function of an `extern "C" { ... }` block; a
    prototype counts when the source defines that function further on. `__global__` kernels
    are launched by the host functions, never called from Python, so they are left out.
    A signature Python cannot call (a reference, a struct) raises TypeError, or, given the
    `unreadable` dict, is put there (name -> why) and left out."""
    tokens = _tokens(_without_directives(source))
    found: list[dict] = []
    i = 0
    while i < len(tokens):
        if tokens[i].text == "extern" and i + 1 < len(tokens) and tokens[i + 1].text == '"C"':
            i += 2
            if i < len(tokens) and tokens[i].text == "{":
                i += 1
                while i < len(tokens) and tokens[i].text != "}":
                    i, fn = _declaration(tokens, i)
                    found += [fn] if fn else []
                i += 1
            else:
                i, fn = _declaration(tokens, i)
                found += [fn] if fn else []
        else:
            i += 1
    defined = {tokens[k].text for k in range(len(tokens) - 1)
               if tokens[k].kind == "ident" and tokens[k + 1].text == "("
               and tokens[_matching(tokens, k + 1) + 1:][:1]
               and tokens[_matching(tokens, k + 1) + 1].text == "{"}
    functions = {}
    for fn in found:
        if fn["kernel"] or not (fn["body"] or fn["name"] in defined):
            continue
        try:
            parsed = [p for k, decl in enumerate(_split_params(fn["params"]))
                      for p in [_parse_param(fn["name"], k, decl)] if p is not None]
        except TypeError as err:
            if unreadable is None:
                raise
            unreadable[fn["name"]] = str(err)
            continue
        functions[fn["name"]] = (fn["ret"], parsed)
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
        self.fn.restype = (ctypes.c_void_p if ret.endswith("*") else
                           SCALAR_CTYPES.get(ret) if ret != "void" else None)
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
        unreadable: dict[str, str] = {}
        self._functions = {name: NativeFunction(self._library, name, ret, params, device)
                           for name, (ret, params) in parse_signatures(source, unreadable).items()
                           if hasattr(self._library, name)}   # an unused `inline` one is not
        self._unreadable = unreadable
        if not self._functions and unreadable:
            raise TypeError(next(iter(unreadable.values())))
        if not self._functions:
            raise CompileError("loader", 'the source defines no `extern "C"` function; '
                               'mark each function Python calls with extern "C"', source)

    def __getattr__(self, name: str) -> NativeFunction:
        try:
            return self.__dict__["_functions"][name]
        except KeyError:
            why = self.__dict__.get("_unreadable", {}).get(name)
            if why:        # a helper Python cannot call: said when it is asked for
                raise TypeError(why) from None
            known = ", ".join(self.__dict__.get("_functions", {})) or "none"
            raise AttributeError(f'no extern "C" function {name!r} (defined: {known})') from None
