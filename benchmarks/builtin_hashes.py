"""Hashes of what the builtin agent writes, to prove a refactoring changed nothing.

For every problem found (the problems the builtin agent's tests write, tests/test_builtin*.py,
the shipped examples, the test problems, the KernelBench sample under build/kb_sample and any
folder given with --problems)
and each target (cpp, triton) it generates the first candidate ("initial"), the conservative
one ("fix"), and walks the analyst's recommendations over four made-up verdicts (faster than
eager, slower, small and fast, mostly in the vendor's GEMM) until it has none left. Each output is hashed (sha256), each
candidate also without its `# kforge-builtin:` header line ("initial-body", "fix-body"); a
problem the agent cannot lower hashes its failure message.

    .venv/bin/python benchmarks/builtin_hashes.py --save /tmp/before.json      # before
    .venv/bin/python benchmarks/builtin_hashes.py --compare /tmp/before.json   # after

(--header-may-differ for a change that rewrites the header line only: the whole candidates
are still compared and shown, but only the bodies and the analyst's answers must agree.
--variants also writes, from each first candidate, one "optimise" candidate per knob change in
VARIANTS, and hashes its body and the analyst's answers to it: candidates the first ones are
not, as the analyst meets them after its own recommendations.)

(--problems DIR for more, e.g. KernelBench's levels; with --compare only the problems the saved
run reached are generated, so a saved run stopped part way still compares.)

prints one row per kind of output: problems, targets, identical, differing (and the names of
the first differing ones). Nothing is evaluated: no compiler, no worker, a few minutes.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from kforge_nb.agents.base import AnalysisRequest, GenerationRequest  # noqa: E402
from kforge_nb.agents.builtin import BuiltinAnalyst, BuiltinGenerator  # noqa: E402
from kforge_nb.agents.builtin.sweep import kernel_text  # noqa: E402
from kforge_nb.problem import Problem  # noqa: E402
from kforge_nb.result import CORRECT, Result  # noqa: E402

TARGETS = ("cpp", "triton")
FOLDERS = ("kforge_nb/targets/examples", "tests/problems", "tests/adversarial/problems",
           "build/kb_sample/problems")
# made-up verdicts the analyst's rules read (speedup, time, roofline, profile)
VERDICTS = {
    "faster": {"speedup_vs_eager": 1.5, "candidate_ms": 1.0, "eager_ms": 1.5,
               "fraction_of_sol": 0.3, "bound": "memory", "timing_real": True},
    "slower": {"speedup_vs_eager": 0.5, "candidate_ms": 2.0, "eager_ms": 1.0,
               "fraction_of_sol": 0.1, "bound": "memory", "timing_real": True,
               "top_kernels": [{"name": "aten::addmm", "share": 0.7}]},
    "small": {"speedup_vs_eager": 1.1, "candidate_ms": 0.01, "eager_ms": 0.011,
              "fraction_of_sol": 0.05, "bound": "memory", "timing_real": True},
    "vendor-bound": {"speedup_vs_eager": 1.2, "candidate_ms": 1.0, "eager_ms": 1.2,
                     "fraction_of_sol": 0.6, "bound": "compute", "timing_real": True,
                     "top_kernels": [{"name": "aten::addmm", "share": 0.7}]},
}


# the knob changes --variants applies to each first candidate, per target
VARIANTS = {
    "cpp": [{"kind": "rows_as_lanes", "value": True}, {"kind": "matmul", "value": "kernel"},
            {"kind": "vector_width", "value": 512}, {"kind": "lane_block", "value": 1024},
            {"kind": "accumulate", "value": "float"}, {"kind": "accumulate", "value": "double"},
            {"kind": "schedule", "value": "dynamic"}, {"kind": "reuse_output", "value": False},
            {"kind": "min_parallel_work", "value": 1 << 30},
            {"kind": "vector_math", "enable": False}, {"kind": "fix"}],
    "triton": [{"kind": "matmul", "value": "kernel", "dot": "fma"},
               {"kind": "matmul", "value": "kernel", "dot": "ieee"},
               {"kind": "autotune", "enable": True}, {"kind": "warps", "value": 8},
               {"kind": "block_size", "value": 4096}],
}


def problems(extra: list[str]) -> dict[str, str]:
    """name -> source of every problem to hash, sorted by name."""
    found = {}
    for test in sorted((ROOT / "tests").glob("test_builtin*.py")):
        module = importlib.import_module(test.stem)
        for table, value in vars(module).items():     # PROBLEMS, SPLIT, MATVECS...: the
            if isinstance(value, dict):                # dicts of whole problem files
                found.update({f"{test.stem}/{table}/{name}": source
                              for name, source in value.items()
                              if isinstance(source, str) and "class Model" in source})
    for folder in [*FOLDERS, *extra]:
        path = Path(folder) if Path(folder).is_absolute() else ROOT / folder
        for file in sorted(path.rglob("*.py")) if path.is_dir() else []:
            source = file.read_text()
            if "class Model" in source:
                found[f"{folder}/{file.relative_to(path)}"] = source
    return dict(sorted(found.items()))


def digest(text: str | None) -> str:
    return hashlib.sha256((text or "").encode()).hexdigest()[:16]


def generate(problem: Problem, target: str, kind: str, **request) -> str:
    try:
        generation = BuiltinGenerator().generate(GenerationRequest(problem, target, kind,
                                                                   **request))
    except Exception as err:        # a crash is an output too: it must not change either
        return f"crash: {type(err).__name__}: {err}"
    return generation.code if generation.code is not None else f"failure: {generation.failure}"


def recommendations(problem: Problem, target: str, code: str) -> str:
    """Every recommendation the analyst gives, in order, under each made-up verdict."""
    lines = []
    for name, summary in VERDICTS.items():
        history: list[str] = []
        for _ in range(20):
            rec = BuiltinAnalyst().analyse(AnalysisRequest(
                problem, target, code, Result(CORRECT, "ok"), dict(summary), list(history)))
            lines.append(f"{name}: {rec.title} | {rec.text}")
            if rec.action.get("kind") == "done" or rec.title in history:
                break
            history.append(rec.title)
    return "\n".join(lines)


def variants(problem: Problem, target: str, initial: str) -> dict[str, str]:
    """key tail -> hash of each knob change's candidate body and the analyst's answers to it."""
    out = {}
    for action in VARIANTS[target]:
        label = "+".join(f"{k}={v}" for k, v in action.items() if k != "kind")
        label = f"{action['kind']}:{label}"
        code = generate(problem, target, "optimise", previous_code=initial, action=action,
                        instruction=f"action: {json.dumps(action)}")
        out[f"{label}|variant-body"] = digest(kernel_text(code))
        if not code.startswith(("failure: ", "crash: ")):
            out[f"{label}|variant-analyst"] = digest(recommendations(problem, target, code))
    return out


def hashes(extra: list[str], save: str | None = None, only: set | None = None,
           with_variants: bool = False) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, source in problems(extra).items():
        if only is not None and name not in only:
            continue
        print(name, file=sys.stderr, flush=True)      # progress: a slow problem shows
        if save:                                       # so far: a long run stopped keeps them
            Path(save).write_text(json.dumps(out, indent=1, sort_keys=True))
        try:
            problem = Problem.from_string(source, name=Path(name).stem)
        except Exception as err:
            out[f"{name}|problem"] = digest(f"{type(err).__name__}: {err}")
            continue
        for target in TARGETS:
            initial = generate(problem, target, "initial")
            for kind, code in (("initial", initial), ("fix", generate(problem, target, "fix"))):
                out[f"{name}|{target}|{kind}"] = digest(code)
                out[f"{name}|{target}|{kind}-body"] = digest(kernel_text(code))
            if not initial.startswith(("failure: ", "crash: ")):
                out[f"{name}|{target}|analyst"] = digest(recommendations(problem, target,
                                                                          initial))
                if with_variants:
                    out.update({f"{name}|{target}|{tail}": value for tail, value in
                                variants(problem, target, initial).items()})
    return out


KINDS = ("initial", "initial-body", "fix", "fix-body", "analyst", "variant-body",
         "variant-analyst")
WHOLE = ("initial", "fix")      # the kinds that include the header line


def table(before: dict[str, str], after: dict[str, str], header_may_differ: bool = False) -> bool:
    """Prints the comparison; True when every hash that must agree is identical and none is
    missing (with `header_may_differ`, the whole candidates need not agree)."""
    same = True
    if set(before) != set(after):
        print(f"compared: {len(set(before) & set(after))} outputs found by both runs; "
              f"{len(set(before) - set(after))} only before, {len(set(after) - set(before))} "
              "only now")
    print(f"{'output':12} {'problems':>8} {'targets':>7} {'identical':>9} {'differing':>9}")
    for kind in KINDS:
        keys = sorted({k for k in [*before, *after] if k.endswith(f"|{kind}")})
        differ = [k for k in keys if before.get(k) != after.get(k)]
        print(f"{kind:12} {len({k.split('|')[0] for k in keys}):8} "
              f"{len({k.split('|')[1] for k in keys}):7} {len(keys) - len(differ):9} "
              f"{len(differ):9}" + (" (header line: may differ)"
                                    if header_may_differ and kind in WHOLE else ""))
        for k in differ[:10]:
            print(f"    differs: {k}")
        if not (header_may_differ and kind in WHOLE):
            same = same and not differ and all(k in before and k in after for k in keys)
    total = len(set(before) | set(after))
    identical = sum(before.get(k) == after.get(k) for k in set(before) | set(after))
    print(f"all: {identical}/{total} identical")
    return same and (header_may_differ or identical == total)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", action="append", default=[],
                        help="another folder of KernelBench-form problems (searched recursively)")
    parser.add_argument("--save", help="write the hashes to this JSON file")
    parser.add_argument("--compare", help="compare with the hashes in this JSON file")
    parser.add_argument("--variants", action="store_true",
                        help="also each first candidate with each knob change of VARIANTS")
    parser.add_argument("--header-may-differ", action="store_true",
                        help="only the candidates without their header line, and the "
                             "analyst's answers, must agree")
    args = parser.parse_args()
    before = json.loads(Path(args.compare).read_text()) if args.compare else None
    # a saved run stopped part way (a slow machine): compare the problems it reached
    reached = {key.split("|")[0] for key in before} if before is not None else None
    now = hashes(args.problems, args.save, reached, args.variants)
    if args.save:
        Path(args.save).write_text(json.dumps(now, indent=1, sort_keys=True))
        print(f"{len(now)} hashes written to {args.save}")
    return 0 if before is None or table(before, now, args.header_may_differ) else 1


if __name__ == "__main__":
    sys.exit(main())
