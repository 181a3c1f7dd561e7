"""`session.export(path)`: the best kernel as one standalone .py that runs without kforge-nb.

The file holds, in order: a docstring with the verdict; the `kforge_nb.runtime` loader sources
(native.py, cpp.py, cuda.py) embedded as strings and installed as modules only when kforge-nb is
not importable, so a candidate's `from kforge_nb.runtime import cpp` keeps working; the
candidate itself (ModelNew); the reference it was judged against, as a string; the verdict's
own figures (VERDICT: the candidate's time, eager's, the speedup with its 95 % interval and the
head-to-head with the best of its time, as the evaluator measured them side by side); and a
`__main__` that checks ModelNew against the reference on the reference's inputs and times both:

    python kernel.py [--save OUT.pt] [--repeats N]      # needs torch (and triton for Triton)
    python kernel.py --write-reference ref.py           # then: kforge eval ref.py RUN/best_candidate.py --as-judged
    from kernel import ModelNew                         # use it in your own code

What `__main__` prints says the verdict's figures first, then its own timing as what it is: a
new measurement, made at another moment in another process (plain loops, ModelNew and the
reference alternating in a few blocks), with its own spread, not the verdict (issue 35: a
re-timing on a busy machine read 6.56 ms against 0.46 ms for a kernel judged 4.89x faster).
"""
from __future__ import annotations

import pprint
import re
import shlex
from pathlib import Path

from . import __version__
from .artifacts import finite
from .intervals import own_ms, valid_ci, versus_text
from .options import DEFAULT_PRECISION
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
    figures = verdict_figures(attempt)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(standalone(attempt.code, session.problem.source, session.target.name,
                               f"{session.problem.name}, candidate {attempt.iteration}."
                               f"{attempt.sample}", figures["text"], figures,
                               judged_with(session, attempt)))
    return path


# --- the flags the run judged a candidate with -----------------------------------------------
# A run allows what its agent keeps in torch on purpose (the builtin agent's `round`, a vendor
# GEMM): `kforge eval` of the run's best_candidate.py, without those flags, refuses it. The
# session writes them on the file's first line (`judged_line`, before the candidate's code,
# never from it), and `kforge eval --as-judged` reads them back: only these flags, op names
# only (never '*'), said before judging.
JUDGED_WITH = "# kforge-judged-with:"
DECLARABLE = ("--target", "--precision", "--allow")
OP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")


def judged_with(session, attempt) -> list[str]:
    """The `kforge eval` flags that judge `attempt` as the session did."""
    options = session.options
    ops = [*options.guardrails.allow,
           *(attempt.generation.kept_ops if attempt.generation else ())]
    flags = ["--target", session.target.name]
    if options.precision != DEFAULT_PRECISION:
        flags += ["--precision", options.precision]
    for op in dict.fromkeys(ops):          # in order, once each
        flags += ["--allow", op]
    return flags


def judged_line(session, attempt) -> str:
    return f"{JUDGED_WITH} {shlex.join(judged_with(session, attempt))}\n"


class DeclarationError(ValueError):
    pass


def declared_flags(text: str) -> list[str] | None:
    """The flags of a file's `# kforge-judged-with:` line (None where it has none), checked:
    only DECLARABLE flags, each with one value, op names only ('*' is never declared)."""
    line = next((l for l in text.splitlines() if l.startswith(JUDGED_WITH)), None)
    if line is None:
        return None
    try:
        words = shlex.split(line[len(JUDGED_WITH):])
    except ValueError as err:
        raise DeclarationError(f"its {JUDGED_WITH} line does not parse: {err}") from None
    if len(words) % 2:
        raise DeclarationError(f"its {JUDGED_WITH} line has a flag without a value")
    for flag, value in zip(words[::2], words[1::2]):
        if flag not in DECLARABLE:
            raise DeclarationError(f"its {JUDGED_WITH} line names {flag!r}; only "
                                   f"{', '.join(DECLARABLE)} can be declared")
        if flag == "--allow" and not OP_NAME.match(value):
            raise DeclarationError(f"its {JUDGED_WITH} line allows {value!r}, not an op name")
    return words


def verdict_figures(attempt) -> dict:
    """The verdict's own figures, as the exported file keeps them (VERDICT) and says them: the
    candidate's time (on a busy CPU its own time, its blocks' low calls), eager's, the speedups
    with their 95 % intervals, the head-to-head with the best of its time, and all of it in
    words (`text`: Result.timing_lines, as every view says it)."""
    result, t = attempt.result, attempt.result.timing
    lines = [f"{result.state}: {result.message.splitlines()[0] if result.message else ''}",
             *result.timing_lines()]
    if t.device and t.candidate_ms is not None:
        lines.append(f"on {t.device}, timed side by side in {t.rounds} interleaved rounds"
                     if t.real and t.rounds else f"on {t.device}")
    versus = t.versus if isinstance(t.versus, dict) else None
    return {
        "id": attempt.id, "state": result.state, "real": t.real, "busy": t.busy,
        "candidate_ms": own_ms(t),
        "candidate_ms_is": "its own time: the median of its blocks' low calls (busy CPU)"
        if t.busy and t.candidate_low_ms else "the median of its timed blocks",
        "eager_ms": t.eager_ms, "compile_ms": t.compile_ms,
        "speedup_vs_eager": t.speedup_vs_eager,
        "speedup_vs_eager_ci": list(valid_ci(t.speedup_vs_eager_ci) or ()) or None,
        "speedup_vs_compile": t.speedup_vs_compile,
        "speedup_vs_compile_ci": list(valid_ci(t.speedup_vs_compile_ci) or ()) or None,
        "head_to_head": versus_text(versus, named=True) if versus else None,
        "device": t.device, "text": "\n".join(lines)}


def standalone(code: str, reference: str, target: str, label: str, verdict: str,
               figures: dict | None = None, flags: list[str] | None = None) -> str:
    future, body = split_future_imports(code)
    flags = shlex.join(flags or ["--target", target])
    uses_runtime = bool(re.search(r"\bkforge_nb\b", code))
    parts = [HEADER.format(label=label, target=target, version=__version__,
                           verdict=verdict.replace('"""', "'''").replace("\n", "\n  "),
                           needs="torch and triton" if target == "triton" else "torch",
                           flags=flags),
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
    parts.append(MAIN.format(reference=literal(reference), device=device,
                             verdict=pprint.pformat(finite(figures or {"text": verdict}),
                                                    sort_dicts=False, width=96)))
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

Verdict when exported (the evaluator's figures, timed side by side; VERDICT below):
  {verdict}

Standalone: needs {needs} only. Run it to check ModelNew against the reference Model
on the reference's inputs and time both:

    python this_file.py [--save OUT.pt] [--repeats N]

or import ModelNew from it. Its timing is a new measurement, made at another moment in another
process with plain loops: its own figures with their own spread, not the verdict's.

The run judged this kernel with `kforge eval REFERENCE.py best_candidate.py {flags}`
(the run folder's best_candidate.py says so on its first line, and `kforge eval --as-judged`
reads it back; `python this_file.py --write-reference REFERENCE.py` writes the reference).
Not this file: its loader installs modules, which the evaluator refuses in a candidate.
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
# the verdict when exported: the evaluator's own figures (candidate, eager, the speedups with
# their 95 % intervals, the head-to-head with the best of its time), timed side by side
VERDICT = {verdict}
BLOCKS = 5      # the timing below: ModelNew and the reference alternate in this many blocks


def _load_reference():
    namespace = {{"__name__": "kforge_reference"}}
    exec(compile(REFERENCE, "<reference>", "exec"), namespace)
    return namespace


def _block_ms(fn, calls):
    """One block: `calls` calls timed together, in ms a call."""
    import time
    import torch
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e3


def _timed_here(candidate, reference, repeats):
    """ModelNew and the reference timed now, in alternating blocks (ABBA): the medians, the
    median of the blocks' ratios and their range (this measurement's own spread)."""
    import statistics
    blocks = max(1, min(BLOCKS, repeats))
    calls = max(1, repeats // blocks)
    candidate(), reference()                       # warm up: build, caches, the allocator
    times = {{"candidate": [], "reference": []}}
    sides = [("candidate", candidate), ("reference", reference)]
    for k in range(blocks):
        for name, fn in (sides if k % 2 == 0 else sides[::-1]):
            times[name].append(_block_ms(fn, calls))
    ratios = [r / c for r, c in zip(times["reference"], times["candidate"]) if c > 0]
    return {{
        "about": ("a new measurement, made now in this process at another moment than the "
                  "verdict's: ModelNew and the reference alternating in "
                  f"{{blocks}} block{{'s' if blocks > 1 else ''}} of {{calls}} call"
                  f"{{'s' if calls > 1 else ''}} (plain loops, not the evaluator's rounds); "
                  "its figures and their spread are its own, and differ from the verdict's as "
                  "the machine's state differs"),
        "candidate_ms": statistics.median(times["candidate"]),
        "reference_ms": statistics.median(times["reference"]),
        "speedup": statistics.median(ratios) if ratios else None,
        "speedup_range": [min(ratios), max(ratios)] if ratios else None,
        "blocks": blocks, "calls_per_block": calls}}


def _first(output):
    return output[0] if isinstance(output, (list, tuple)) else output


def check(repeats=20, save=None):
    """ModelNew vs the reference Model on the reference's inputs: its errors, the verdict's
    figures when exported (VERDICT) and a timing made now (`timed_here`: a new measurement
    at another moment, with its own spread)."""
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
                  "verdict": VERDICT,
                  "timed_here": _timed_here(lambda: candidate(*inputs),
                                            lambda: model(*inputs), repeats)}}
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
    parser.add_argument("--write-reference", metavar="PATH",
                        help="write the reference (REFERENCE) to PATH and stop, for kforge eval")
    options = parser.parse_args()
    if options.write_reference:
        with open(options.write_reference, "w") as f:
            f.write(REFERENCE)
        raise SystemExit(0)
    report = check(options.repeats, options.save)
    here = report["timed_here"]
    spread = here["speedup_range"]
    print("verdict when exported (the evaluator's figures, timed side by side):\\n  "
          + VERDICT["text"].replace("\\n", "\\n  "))
    if here["speedup"] is not None:
        print(f"timed here, now: ModelNew {{here['candidate_ms']:.4g}} ms, the reference "
              f"{{here['reference_ms']:.4g}} ms, {{here['speedup']:.2f}}x (its blocks ranged "
              f"{{spread[0]:.2f}}-{{spread[1]:.2f}}x): {{here['about']}}")
    print(json.dumps(report))
'''
