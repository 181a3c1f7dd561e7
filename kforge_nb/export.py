"""`session.export(path)`: the best kernel as one standalone .py that runs without kforge-nb.

The file holds, in order: a docstring with the verdict; the `kforge_nb.runtime` loader sources
(native.py, cpp.py, cuda.py) embedded as strings and installed as modules only when kforge-nb is
not importable, so a candidate's `from kforge_nb.runtime import cpp` keeps working; the
candidate itself (ModelNew); the reference it was judged against, as a string; and a `__main__`
that checks ModelNew against the reference on the reference's inputs and times both:

    python kernel.py [--save OUT.pt] [--repeats N]      # needs torch (and triton for Triton)
    from kernel import ModelNew                         # use it in your own code
"""
from __future__ import annotations

import re
from pathlib import Path

from . import __version__
from .runtime import cpp as _cpp, cuda as _cuda, native as _native

RUNTIME_MODULES = {"native": _native, "cpp": _cpp, "cuda": _cuda}
DEVICES = {"cpp": "cpu", "cuda": "cuda", "triton": "cuda", "metal": "mps"}


class ExportError(ValueError):
    pass


def export(session, path: str | Path, attempt=None) -> Path:
    """Write `attempt` (default: the session's best) to `path`; return the path."""
    attempt = attempt or session.best
    if attempt is None or not attempt.code:
        raise ExportError("nothing to export: the session has no correct candidate yet "
                          "(pass attempt=session.history[i] to export another one)")
    path = Path(path)
    if path.suffix != ".py":
        path = path.with_suffix(".py")
    t = attempt.result.timing
    verdict = f"{attempt.result.state}: {attempt.result.message.splitlines()[0]}"
    if t.candidate_ms is not None:
        verdict += f"\n  {t.candidate_ms:.4g} ms" + (
            f", {t.speedup_vs_eager:.2f}x vs eager" if t.speedup_vs_eager else "") + (
            f", {t.speedup_vs_compile:.2f}x vs torch.compile" if t.speedup_vs_compile else "") + (
            f" on {t.device}" if t.device else "") + ("" if t.real else f" ({t.note})")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(standalone(attempt.code, session.problem.source, session.target.name,
                               f"{session.problem.name}, candidate {attempt.iteration}."
                               f"{attempt.sample}", verdict))
    return path


def standalone(code: str, reference: str, target: str, label: str, verdict: str) -> str:
    future, body = split_future_imports(code)
    uses_runtime = bool(re.search(r"\bkforge_nb\b", code))
    parts = [HEADER.format(label=label, target=target, version=__version__,
                           verdict=verdict.replace('"""', "'''"),
                           needs="torch and triton" if target == "triton" else "torch"),
             future]
    if uses_runtime:
        sources = ",\n".join(f"    {name!r}: {literal(Path(m.__file__).read_text())}"
                             for name, m in RUNTIME_MODULES.items())
        parts.append(RUNTIME.format(sources=sources))
    if target == "triton":
        parts.append(TRITON_ON_CPU)
    parts.append(f"# --- the kernel ({label}) {'-' * 40}\n\n{body.strip()}\n")
    device = ('"cuda" if torch.cuda.is_available() else "cpu"' if target == "triton"
              else repr(DEVICES.get(target, "cpu")))
    parts.append(MAIN.format(reference=literal(reference), device=device))
    return "\n".join(p for p in parts if p)


def split_future_imports(code: str) -> tuple[str, str]:
    """`from __future__` lines must come first in a file: hoist them."""
    future = [l for l in code.splitlines() if l.startswith("from __future__ import")]
    body = "\n".join(l for l in code.splitlines() if not l.startswith("from __future__ import"))
    return "\n".join(future) + ("\n" if future else ""), body


def literal(text: str) -> str:
    """A readable raw triple-quoted literal where that is exact, repr() otherwise."""
    if "'''" not in text and not text.endswith("\\") and "\r" not in text:
        return "r'''" + text + "'''"
    return repr(text)


HEADER = '''"""{label}: a {target} kernel exported by kforge-nb {version}.

Verdict when exported:
  {verdict}

Standalone: needs {needs} only. Run it to check ModelNew against the reference Model
on the reference's inputs and time both:

    python this_file.py [--save OUT.pt] [--repeats N]

or import ModelNew from it.
"""'''

RUNTIME = '''# --- kforge_nb.runtime, embedded: builds C++/CUDA sources into a C-ABI library and calls it.
# Installed as modules only when kforge-nb itself is not importable.
import importlib.util as _importlib_util
import sys as _sys
import types as _types

_KFORGE_RUNTIME = {{
{sources},
}}


def _install_kforge_runtime():
    for name in ("kforge_nb", "kforge_nb.runtime"):
        package = _types.ModuleType(name)
        package.__path__ = []
        _sys.modules[name] = package
    _sys.modules["kforge_nb"].runtime = _sys.modules["kforge_nb.runtime"]
    for name, source in _KFORGE_RUNTIME.items():
        module = _types.ModuleType(f"kforge_nb.runtime.{{name}}")
        module.__package__ = "kforge_nb.runtime"
        module.__file__ = f"<embedded kforge_nb/runtime/{{name}}.py>"
        _sys.modules[module.__name__] = module
        exec(compile(source, module.__file__, "exec"), module.__dict__)
        setattr(_sys.modules["kforge_nb.runtime"], name, module)


try:
    _found = _importlib_util.find_spec("kforge_nb.runtime.native") is not None
except (ImportError, ValueError):
    _found = False
if not _found:
    _install_kforge_runtime()
'''

TRITON_ON_CPU = '''# Without a CUDA GPU, Triton kernels run in Triton's interpreter (NumPy on the CPU): results
# are exact, timings are not performance figures. It must be chosen before triton is imported.
import os as _os

import torch as _torch

if not _torch.cuda.is_available():
    _os.environ.setdefault("TRITON_INTERPRET", "1")
'''

MAIN = '''
# --- the reference ModelNew was judged against (KernelBench form) ---------------------------

import torch  # noqa: E402

REFERENCE = {reference}
DEVICE = {device}


def _load_reference():
    namespace = {{"__name__": "kforge_reference"}}
    exec(compile(REFERENCE, "<reference>", "exec"), namespace)
    return namespace


def _time_ms(fn, repeats):
    import time
    import torch
    fn()
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / repeats * 1e3


def _first(output):
    return output[0] if isinstance(output, (list, tuple)) else output


def check(repeats=20, save=None):
    """ModelNew vs the reference Model on the reference's inputs: errors and timings."""
    import torch
    reference = _load_reference()
    torch.manual_seed(0)
    init_inputs = list(reference["get_init_inputs"]())
    model = reference["Model"](*init_inputs).to(DEVICE)
    torch.manual_seed(0)
    candidate = ModelNew(*init_inputs).to(DEVICE)
    state = model.state_dict()
    if state and set(candidate.state_dict()) == set(state):
        candidate.load_state_dict(state)
    torch.manual_seed(0)
    inputs = [x.to(DEVICE) if isinstance(x, torch.Tensor) else x
              for x in reference["get_inputs"]()]
    with torch.no_grad():
        expected = model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
        got = candidate(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
        got, expected = _first(got), _first(expected)
        report = {{"shape": list(got.shape), "dtype": str(got.dtype).replace("torch.", ""),
                  "max_abs_error": float((got.double() - expected.double()).abs().max()),
                  "allclose": bool(torch.allclose(got, expected, atol=1e-4, rtol=1e-4)),
                  "candidate_ms": _time_ms(lambda: candidate(*inputs), repeats),
                  "reference_ms": _time_ms(lambda: model(*inputs), repeats)}}
    if save:
        torch.save({{"inputs": [x.cpu() if isinstance(x, torch.Tensor) else x for x in inputs],
                    "output": got.cpu(), "expected": expected.cpu()}}, save)
    return report


if __name__ == "__main__":
    import argparse
    import json
    parser = argparse.ArgumentParser(description="check ModelNew against the reference, time both")
    parser.add_argument("--save", help="write inputs, output and expected output to this .pt file")
    parser.add_argument("--repeats", type=int, default=20)
    options = parser.parse_args()
    print(json.dumps(check(options.repeats, options.save)))
'''
