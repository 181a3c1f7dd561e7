"""The builtin agent over the problem suite: one session per problem, one table.

    PYTHONPATH=. python benchmarks/builtin_suite.py [PROBLEMS...] [--target cpp] [--level 2]
        [--precision strict] [--iterations 3] [--jsonl rows.jsonl] [--no-compile-baseline]
        [--draw 50 --seed S [--scale cpu|gpu] [--no-fixed]]

`--draw N --seed S` adds N problems from benchmarks/random_problems.py (written under the
output folder) and prints their table beside the fixed suite's: pick a seed nobody tuned on.

The same Bench as `kforge bench` (kforge_nb/bench/); this script adds a level filter, the
random draw, and a table per part. Each part's rows are kept in its own bench folder under
--out (results.jsonl, results.csv, results.json), so a run cut short resumes where it stopped.
Set KFORGE_SIZE=gpu for the realistic sizes.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from kforge_nb.agents import AgentConfig  # noqa: E402
from kforge_nb.bench import Bench, Entry, Progress, Store, table  # noqa: E402
from kforge_nb.bench.suite import entries  # noqa: E402
from kforge_nb.evaluator import EvalOptions  # noqa: E402
from kforge_nb.guardrails import Guardrails  # noqa: E402
from kforge_nb.session import Budget  # noqa: E402
from random_problems import write_draw  # noqa: E402

SUITE = ROOT / "benchmarks" / "problems"


def level_of(path: Path) -> int | None:
    """The level column of the suite's README for this problem."""
    readme = (SUITE / "README.md").read_text()
    match = re.search(rf"^\| `{re.escape(path.stem)}` \| (\d) \|", readme, re.MULTILINE)
    return int(match.group(1)) if match else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("problems", nargs="*", default=[str(SUITE)])
    parser.add_argument("--target", default="auto")
    parser.add_argument("--level", type=int)
    parser.add_argument("--only", help="regex on problem names")
    parser.add_argument("--precision", default="strict")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--no-compile-baseline", action="store_true")
    parser.add_argument("--jsonl", help="also append each row here, as it is measured")
    parser.add_argument("--out", default="kforge-runs/bench")
    parser.add_argument("--draw", type=int, default=0, help="add N random problems")
    parser.add_argument("--seed", type=int, help="seed of the random draw")
    parser.add_argument("--scale", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--no-fixed", action="store_true", help="only the random draw")
    args = parser.parse_args()
    if args.draw and args.seed is None:
        parser.error("--draw needs --seed (pick one nobody tuned on)")

    fixed = [] if args.no_fixed else [
        e for e in entries(args.problems)
        if (args.level is None or level_of(e.path) == args.level)
        and (args.only is None or re.search(args.only, e.path.stem))]
    drawn = [Entry(p.stem, p) for p in write_draw(
        Path(args.out) / f"draw-{args.seed}-{args.scale}", args.seed, args.draw, args.scale)] \
        if args.draw else []
    options = EvalOptions(trials=args.trials, precision=args.precision,
                          guardrails=Guardrails(precision=args.precision),
                          baselines=("eager",) if args.no_compile_baseline else
                          ("eager", "compile"))
    settings = {"target": args.target, "precision": args.precision,
                "iterations": args.iterations, "trials": args.trials,
                "compile_baseline": not args.no_compile_baseline}

    class Rows(Progress):
        """A line per finished problem on stderr (and in --jsonl)."""
        def finished_row(self, row):
            print(f"{row.id}: {row.state} x{row.speedup_vs_eager or 0:.2f} eager, "
                  f"x{row.speedup_vs_compile or 0:.2f} compile ({row.seconds:.0f} s)",
                  file=sys.stderr, flush=True)
            if args.jsonl:
                with open(args.jsonl, "a") as f:
                    f.write(json.dumps({**dataclasses.asdict(row), "precision": args.precision})
                            + "\n")

    def run(part: str, suite: list) -> list:
        store = Store(Path(args.out) / part, {**settings, "part": part})
        return Bench(suite, args.target, store, agents=AgentConfig(provider="builtin"),
                     budget=Budget(iterations=args.iterations, patience=2),
                     options=options).run(Rows())

    print(f"\nprecision policy: {args.precision}")
    if fixed:
        print(f"\nfixed suite ({len(fixed)} problems)\n" + table(run("fixed", fixed)))
    if drawn:
        rows = run(f"draw-{args.seed}-{args.scale}-bench", drawn)
        print(f"\nrandom draw: seed {args.seed}, {args.draw} problems, {args.scale} scale\n"
              + table(rows))


if __name__ == "__main__":
    main()
