"""Run the builtin agent over a folder of problems and print what the evaluator says.

    python -m kforge_nb.agents.builtin.bench [PROBLEM.py | FOLDER ...] [--target cpp]
                                              [--rounds 2] [--json results.json]

For each problem: the initial candidate is generated and evaluated; then, `--rounds` times,
BuiltinAnalyst recommends one change for the best candidate so far, BuiltinGenerator applies
it, and the result is evaluated (what a session with automatic decisions does). The table shows
the initial verdict and speedup vs eager, the best speedup, and the changes that led to it.
Timings are only as steady as the machine: on a shared host run it when it is quiet.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

from ...evaluator import EvalOptions, Guardrails, evaluate
from ...problem import Problem
from ..base import AnalysisRequest, GenerationRequest
from ..feedback import profile_summary
from .analyst import BuiltinAnalyst
from .generator import BuiltinGenerator


def problems_in(paths: list[str]) -> list[Path]:
    found = []
    for p in map(Path, paths):
        found += sorted(p.glob("*.py")) if p.is_dir() else [p]
    return found


def run_one(path: Path, target: str, rounds: int, out_dir: Path) -> dict:
    problem = Problem.from_file(path)
    generator, analyst = BuiltinGenerator(), BuiltinAnalyst()
    started = time.monotonic()

    def judge(generation):
        if generation.code is None:
            return None
        return evaluate(problem, generation.code, target, EvalOptions(
            baselines=("eager",), out_dir=out_dir,
            guardrails=Guardrails(allow=generation.kept_ops)))

    generation = generator.generate(GenerationRequest(problem, target, "initial"))
    result = judge(generation)
    row = {"problem": path.stem, "state": result.state if result else "generation_failure",
           "speedup": result.timing.speedup_vs_eager if result else None,
           "message": (result.message if result else generation.failure)[:300],
           "notes": generation.notes, "steps": []}
    best = (generation, result) if result is not None and result.ok else None
    history: list[str] = []
    for iteration in range(1, rounds + 1):
        if best is None:
            break
        code, res = best[0].code, best[1]
        rec = analyst.analyse(AnalysisRequest(problem, target, code, res, profile_summary(res),
                                              history, iteration))
        history.append(rec.title)
        if rec.action.get("kind") in ("none", "done"):
            row["steps"].append({"title": rec.title, "state": "skipped"})
            break
        generation = generator.generate(GenerationRequest(
            problem, target, "optimise", iteration, code, res, rec.text))
        result = judge(generation)
        speed = result.timing.speedup_vs_eager if result and result.ok else None
        row["steps"].append({"title": rec.title, "state": result.state if result else
                             "generation_failure", "speedup": speed})
        if speed and speed > (best[1].timing.speedup_vs_eager or 0):
            best = (generation, result)
    row["best_speedup"] = best[1].timing.speedup_vs_eager if best else None
    row["best_steps"] = [s["title"] for s in row["steps"]
                         if best and s.get("speedup") == row["best_speedup"]]
    row["seconds"] = round(time.monotonic() - started, 1)
    return row


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def table(rows: list[dict]) -> str:
    lines = [f"{'problem':26s} {'state':16s} {'initial':>8s} {'best':>8s}  change that helped",
             "-" * 90]
    for r in rows:
        fmt = lambda v: f"{v:7.2f}x" if v else "      - "
        lines.append(f"{r['problem']:26s} {r['state']:16s} {fmt(r['speedup'])} "
                     f"{fmt(r['best_speedup'])}  {'; '.join(r['best_steps'])}")
    correct = [r for r in rows if r["state"] == "correct"]
    lines.append("-" * 90)
    lines.append(f"correct {len(correct)}/{len(rows)} ({100 * len(correct) / max(len(rows), 1):.0f}%); "
                 f"geomean speedup vs eager: initial {geomean([r['speedup'] for r in correct]) or 0:.2f}x, "
                 f"best {geomean([r['best_speedup'] for r in correct]) or 0:.2f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", default=["benchmarks/problems"])
    parser.add_argument("--target", default="cpp")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", help="write every row (with messages and steps) here")
    args = parser.parse_args(argv)
    os.environ.setdefault("KFORGE_CACHE", tempfile.mkdtemp(prefix="kforge-bench-cache-"))
    out_dir = Path(tempfile.mkdtemp(prefix="kforge-bench-runs-"))
    rows = []
    for path in problems_in(args.paths):
        rows.append(run_one(path, args.target, args.rounds, out_dir))
        r = rows[-1]
        print(f"{r['problem']:26s} {r['state']:16s} {r['speedup'] or 0:6.2f}x -> "
              f"{r['best_speedup'] or 0:6.2f}x  ({r['seconds']} s)", file=sys.stderr, flush=True)
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
