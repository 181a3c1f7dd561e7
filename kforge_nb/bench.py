"""`kforge bench`: run a session per problem of a suite and tabulate the best verdicts.

Each row: problem, best state, speedup vs eager and vs torch.compile, fraction of speed of
light, and whether the timing is a real one. Geometric means are taken over correct rows.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .agents import AgentConfig
from .evaluator import EvalOptions
from .problem import Problem
from .session import Budget, Session


@dataclass
class Row:
    problem: str
    state: str
    candidate_ms: float | None = None
    eager_ms: float | None = None
    compile_ms: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    eager_fraction_of_sol: float | None = None
    fraction_of_sol: float | None = None
    real: bool | None = None
    iterations: int = 0
    seconds: float = 0.0
    note: str = ""


def problem_files(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for p in map(Path, paths):
        files += sorted(f for f in p.glob("*.py") if not f.name.startswith("_")) if p.is_dir() \
            else [p]
    return files


def run_suite(files: list[Path], target: str, agents: AgentConfig, budget: Budget,
              options: EvalOptions, out: str | Path,
              on_row: Callable[[Row], None] | None = None) -> list[Row]:
    rows = []
    for path in files:
        started = time.monotonic()
        try:
            problem = Problem.from_file(path)
        except Exception as err:  # a broken suite entry is a row, not the end of the run
            rows.append(Row(path.stem, "bad_problem", note=str(err)[:200]))
            continue
        session = Session(problem, target, AgentConfig(**vars(agents)),
                          Budget(**vars(budget)), EvalOptions(**{**vars(options)}), out=out)
        session.run()
        rows.append(row_for(session, time.monotonic() - started))
        if on_row:
            on_row(rows[-1])
    return rows


def row_for(session: Session, seconds: float) -> Row:
    best = session.best
    last = session.history[-1] if session.history else None
    if best is None:
        return Row(session.problem.name, last.result.state if last else "no_candidate",
                   iterations=len(session.history), seconds=seconds,
                   note=(session.error or (last.result.message if last else ""))[:200])
    t, r = best.result.timing, best.result.roofline
    eager_sol = (r.speed_of_light_ms / t.eager_ms) if (r.speed_of_light_ms and t.eager_ms
                                                       and t.real) else None
    return Row(session.problem.name, best.result.state, t.candidate_ms, t.eager_ms,
               t.compile_ms, t.speedup_vs_eager, t.speedup_vs_compile, eager_sol,
               r.fraction_of_sol, t.real, len(session.history), seconds,
               (best.generation.notes if best.generation else "")[:200])


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def table(rows: list[Row]) -> str:
    def f(v, spec):
        return format(v, spec) if v is not None else "-"
    head = (f"{'problem':28} {'state':16} {'ms':>9} {'eager ms':>9} {'x eager':>8} "
            f"{'x compile':>9} {'SoL eager':>9} {'SoL':>6}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.problem[:28]:28} {r.state:16} {f(r.candidate_ms, '9.4f')} "
                     f"{f(r.eager_ms, '9.4f')} {f(r.speedup_vs_eager, '8.2f')} "
                     f"{f(r.speedup_vs_compile, '9.2f')} {f(r.eager_fraction_of_sol, '9.1%')} "
                     f"{f(r.fraction_of_sol, '6.1%')}")
    correct = [r for r in rows if r.state == "correct"]
    lines.append("-" * len(head))
    lines.append(f"correct {len(correct)}/{len(rows)}; geomean speedup vs eager "
                 f"{f(geomean([r.speedup_vs_eager for r in correct]), '.2f')}x, vs torch.compile "
                 f"{f(geomean([r.speedup_vs_compile for r in correct]), '.2f')}x")
    if correct:
        worst = min(correct, key=lambda r: r.speedup_vs_eager or math.inf)
        slowest = min(correct, key=lambda r: r.speedup_vs_compile or math.inf)
        lines.append(f"worst vs eager: {worst.problem} {f(worst.speedup_vs_eager, '.2f')}x; "
                     f"worst vs torch.compile: {slowest.problem} "
                     f"{f(slowest.speedup_vs_compile, '.2f')}x")
    if any(r.real is False for r in rows):
        lines.append("NOTE: some timings are not performance figures (Triton interpreter)")
    return "\n".join(lines)
