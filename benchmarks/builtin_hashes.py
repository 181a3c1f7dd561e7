"""Hashes of what the builtin agent writes, to prove a refactoring changed nothing.

For every problem found (the problems the builtin agent's tests write, tests/test_builtin*.py,
the shipped examples, the test problems, the KernelBench sample under build/kb_sample and any
folder given with --problems)
and each target (cpp, triton) it generates the first candidate ("initial"), the conservative
one ("fix"), and walks the analyst's recommendations over three made-up verdicts (faster than
eager, slower, small and fast) until it has none left. Each output is hashed (sha256); a
problem the agent cannot lower hashes its failure message.

    .venv/bin/python benchmarks/builtin_hashes.py --save /tmp/before.json      # before
    .venv/bin/python benchmarks/builtin_hashes.py --compare /tmp/before.json   # after

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


def generate(problem: Problem, target: str, kind: str) -> str:
    try:
        generation = BuiltinGenerator().generate(GenerationRequest(problem, target, kind))
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


def hashes(extra: list[str], save: str | None = None, only: set | None = None) -> dict[str, str]:
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
            out[f"{name}|{target}|initial"] = digest(initial)
            out[f"{name}|{target}|fix"] = digest(generate(problem, target, "fix"))
            if not initial.startswith(("failure: ", "crash: ")):
                out[f"{name}|{target}|analyst"] = digest(recommendations(problem, target,
                                                                          initial))
    return out


def table(before: dict[str, str], after: dict[str, str]) -> bool:
    """Prints the comparison; True when every hash is identical and none is missing."""
    same = True
    if set(before) != set(after):
        print(f"compared: {len(set(before) & set(after))} outputs found by both runs; "
              f"{len(set(before) - set(after))} only before, {len(set(after) - set(before))} "
              "only now")
    print(f"{'output':10} {'problems':>8} {'targets':>7} {'identical':>9} {'differing':>9}")
    for kind in ("initial", "fix", "analyst"):
        keys = sorted({k for k in [*before, *after] if k.endswith(f"|{kind}")})
        differ = [k for k in keys if before.get(k) != after.get(k)]
        print(f"{kind:10} {len({k.split('|')[0] for k in keys}):8} "
              f"{len({k.split('|')[1] for k in keys}):7} {len(keys) - len(differ):9} "
              f"{len(differ):9}")
        for k in differ[:10]:
            print(f"    differs: {k}")
        same = same and not differ
    total = len(set(before) | set(after))
    identical = sum(before.get(k) == after.get(k) for k in set(before) | set(after))
    print(f"all: {identical}/{total} identical")
    return same and identical == total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", action="append", default=[],
                        help="another folder of KernelBench-form problems (searched recursively)")
    parser.add_argument("--save", help="write the hashes to this JSON file")
    parser.add_argument("--compare", help="compare with the hashes in this JSON file")
    args = parser.parse_args()
    before = json.loads(Path(args.compare).read_text()) if args.compare else None
    # a saved run stopped part way (a slow machine): compare the problems it reached
    reached = {key.split("|")[0] for key in before} if before is not None else None
    now = hashes(args.problems, args.save, reached)
    if args.save:
        Path(args.save).write_text(json.dumps(now, indent=1, sort_keys=True))
        print(f"{len(now)} hashes written to {args.save}")
    return 0 if before is None or table(before, now) else 1


if __name__ == "__main__":
    sys.exit(main())
