"""How long does `evaluate()` take? Cold and warm latency per target on this machine.

    python benchmarks/eval_latency.py [--repeats 5] [--json]

Every figure is wall-clock time of one `kforge_nb.evaluator.evaluate()` call (static checks,
candidate worker, verdict, timing and profile of the correct candidate, artifacts) on the
softmax example problem with each target's example candidate, `EvalOptions(baselines=("eager",))`.

- cold: a candidate source never built before, in an evaluator that is already running. A
  unique comment goes into the kernel source itself (the C++/CUDA/Metal string, the body of each
  @triton.jit function), because that, not the Python file, is what the compile caches key on.
- warm: the same source again (the compile cache hits).
- once per process: the fork server's start (imports torch). The reference runs in every
  evaluation (beside the candidate, for side-by-side timing), so it is in cold and warm.

Each run uses fresh temporary KFORGE_CACHE and TRITON_CACHE_DIR folders, so numbers do not
depend on what earlier runs left behind.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

SCRATCH = Path(tempfile.mkdtemp(prefix="kforge-bench-"))
os.environ["KFORGE_CACHE"] = str(SCRATCH / "cache")       # before kforge_nb reads it
os.environ["TRITON_CACHE_DIR"] = str(SCRATCH / "triton")

import torch  # noqa: E402

from kforge_nb.evaluator import EvalOptions, evaluate  # noqa: E402
from kforge_nb.evaluator.parent.process import zygote  # noqa: E402
from kforge_nb.problem import Problem  # noqa: E402
from kforge_nb.targets import get_target  # noqa: E402
from kforge_nb.targets.base import HERE as TARGETS_DIR  # noqa: E402

PROBLEM_PATH = TARGETS_DIR / "examples" / "softmax.py"
DEFINITIONS = [
    "cold  = a candidate source never built before (a unique comment in the kernel source makes "
    "the compile cache miss), in an already-running evaluator",
    "warm  = the same source again (compile cache hit)",
    "1st   = the first (cold) candidate on that target in this process: it also pays one-time "
    "costs (e.g. the CPU peak probe for the roofline, ~1 s); not in the medians",
    "first = first evaluation of a new problem: fork-server start (imports torch) + reference "
    "worker (trial inputs and outputs, eager baseline); paid once per problem and device",
    "each figure is the wall-clock time of one evaluate() call, including timing and profiling "
    "of the correct candidate and writing its artifacts",
]


# --- which targets run here ----------------------------------------------------------------------


def targets_here() -> list[tuple[str, str]]:
    """(target, why it is skipped or '') for the four built-in targets."""
    out = []
    for name in ("cpp", "triton", "cuda", "metal"):
        available = get_target(name).availability()
        skip = "" if available.runs else available.reason.split(":")[0].split(";")[0]
        if name == "cuda" and not torch.cuda.is_available():
            skip = "no CUDA GPU"
        if name == "metal" and not torch.backends.mps.is_available():
            skip = "no MPS (needs a Mac)"
        out.append((name, skip))
    return out


# --- making a source cold ------------------------------------------------------------------------


def uniquify(source: str, tag: str) -> str:
    """The same candidate with a comment that changes the kernel's cache key."""
    comment = f"kforge-bench {tag}"
    # Native source strings (cpp, cuda, metal): a comment on the string's first line.
    source, n = re.subn(r'(\bsource\s*=\s*r?""")', rf"\1// {comment}\n", source)
    # Triton: a comment as the first line of each @triton.jit body (its source is the key).
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    bodies = sorted((fn.body[0].lineno, fn.body[0].col_offset) for fn in ast.walk(tree)
                    if isinstance(fn, ast.FunctionDef) and any(
                        "jit" in ast.unparse(d) or "autotune" in ast.unparse(d)
                        for d in fn.decorator_list))
    for lineno, col in reversed(bodies):
        lines.insert(lineno - 1, " " * col + f"# {comment}\n")
        n += 1
    if not n:
        raise ValueError("found no kernel source to make cold")
    return f"# {comment}\n" + "".join(lines)


# --- measuring -----------------------------------------------------------------------------------


def timed_eval(problem: Problem, source: str, target: str, options: EvalOptions) -> tuple[float, str]:
    start = time.perf_counter()
    result = evaluate(problem, source, target, options)
    return time.perf_counter() - start, result.state


def measure_target(problem: Problem, name: str, options: EvalOptions, repeats: int) -> dict:
    source = get_target(name).example()
    first_s, first_state = timed_eval(problem, uniquify(source, uuid.uuid4().hex), name, options)
    cold, states = [], {first_state}
    for _ in range(repeats):
        seconds, state = timed_eval(problem, uniquify(source, uuid.uuid4().hex), name, options)
        cold.append(seconds)
        states.add(state)
    warm_source = uniquify(source, "warm")
    timed_eval(problem, warm_source, name, options)          # build it once
    warm = []
    for _ in range(repeats):
        seconds, state = timed_eval(problem, warm_source, name, options)
        warm.append(seconds)
        states.add(state)
    target = get_target(name)
    return {"target": name, "device": target.device(), "states": sorted(states),
            "first_candidate_s": first_s, "cold_s": cold, "warm_s": warm,
            "cold_median_s": statistics.median(cold), "warm_median_s": statistics.median(warm),
            "note": target.timing_note()}


def first_evaluation(problem: Problem, devices: list[str], options: EvalOptions) -> dict:
    """The fork server's start, paid once per process (the reference now runs in every
    evaluation, beside the candidate, so it is part of the cold and warm figures)."""
    start = time.perf_counter()
    zygote().ready.wait()
    zygote_s = time.perf_counter() - start
    return {"zygote_start_s": zygote_s, "reference_s": {}, "total_s": zygote_s}


# --- reporting -----------------------------------------------------------------------------------


def host() -> str:
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    triton = "not installed"
    try:
        import triton
        triton = triton.__version__
    except ImportError:
        pass
    return (f"{platform.machine()}, {os.cpu_count()} cores, {gpu} | python "
            f"{platform.python_version()} | torch {torch.__version__} | triton {triton}")


def table(report: dict) -> str:
    first = report["first_evaluation"]
    out = [f"kforge eval latency: {report['problem']} ({report['shape']}), "
           f"EvalOptions(baselines=(\"eager\",)), median of {report['repeats']}",
           f"host: {report['host']}", "",
           f"once per process: fork-server start {first['zygote_start_s']:.2f} s", ""]
    header = f"{'target':<8} {'device':<7} {'verdict':<14} {'1st (s)':>8} {'cold (s)':>9} " \
             f"{'warm (s)':>9}  {'cold range':<12} {'warm range':<12} note"
    out += [header, "-" * len(header)]
    for row in report["targets"]:
        if "skipped" in row:
            out.append(f"{row['target']:<8} {'-':<7} {'-':<14} {'-':>8} {'-':>9} {'-':>9}  "
                       f"{'':<12} {'':<12} skipped: {row['skipped']}")
            continue
        cold, warm = row["cold_s"], row["warm_s"]
        out.append(f"{row['target']:<8} {row['device']:<7} {'/'.join(row['states']):<14} "
                   f"{row['first_candidate_s']:>8.2f} {row['cold_median_s']:>9.2f} "
                   f"{row['warm_median_s']:>9.2f}  {min(cold):.2f}-{max(cold):<7.2f} "
                   f"{min(warm):.2f}-{max(warm):<7.2f} {row['note']}")
    for row in report["targets"]:
        if row.get("states", ["correct"]) != ["correct"]:
            out.append(f"warning: {row['target']} verdicts were {', '.join(row['states'])}, not "
                       "only correct: its figures skip timing and profiling (see --keep artifacts)")
    out += [""] + DEFINITIONS
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="samples per figure (median)")
    parser.add_argument("--json", action="store_true", help="print the raw numbers as JSON")
    parser.add_argument("--targets", nargs="*", help="only these targets")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder "
                        "(caches and artifacts) instead of deleting it")
    args = parser.parse_args(argv)

    problem = Problem.from_file(PROBLEM_PATH)
    options = EvalOptions(baselines=("eager",), out_dir=SCRATCH / "runs")
    plan = [(name, skip) for name, skip in targets_here()
            if not args.targets or name in args.targets]
    devices = sorted({get_target(name).device() for name, skip in plan if not skip})
    report = {"schema_version": 1, "problem": str(PROBLEM_PATH.relative_to(TARGETS_DIR.parent.parent)),
              "shape": "64x1000", "repeats": args.repeats, "host": host(),
              "first_evaluation": first_evaluation(problem, devices, options), "targets": []}
    for name, skip in plan:
        if skip:
            report["targets"].append({"target": name, "skipped": skip})
            continue
        print(f"measuring {name} ...", file=sys.stderr)
        report["targets"].append(measure_target(problem, name, options, args.repeats))
    print(json.dumps(report, indent=2) if args.json else table(report))
    if args.keep:
        print(f"caches and artifacts kept in {SCRATCH}", file=sys.stderr)
    else:
        shutil.rmtree(SCRATCH, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
