"""Greedy against beam (and evolve) search with the builtin agent, on a seeded random draw.

    PYTHONPATH=. python benchmarks/search_compare.py --seed S --draw 12 [--target cpp]
        [--iterations 3] [--samples 3] [--beam 2] [--strategies greedy,beam,evolve]
        [--confirm 3] [--rounds 5] [--out kforge-runs/search] [--jsonl rows.jsonl]
        [--shard K/N]
    python benchmarks/search_compare.py --report rows.jsonl [rows2.jsonl ...]

`--shard K/N` runs the draw's problems whose index is K modulo N (N processes side by side,
e.g. on a GPU host; timings still take the device's lock one at a time); `--report` prints the
table of the rows the shards wrote to their --jsonl files.

For each problem of the draw (benchmarks/random_problems.py; pick a seed nobody tuned on), one
session per strategy with the same rounds and samples. Sessions run at different moments, so
their own timings are not compared: the strategies' best kernels are judged again head to head,
one after the other in turn, `--rounds` times, and each is compared with greedy's by the median
of its speedup vs eager (a ratio taken within one evaluation). "faster" needs a 2 % margin;
within it the two are a tie. Identical best kernels are a tie, measured once.
The table also gives how many candidates each strategy judged: beam and evolve judge about
K times as many as greedy for the same rounds. Every strategy, greedy too, ends with the same
final judging (`--confirm`, 3 finalists by default), so none is named best on one lucky timing.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from kforge_nb.agents import AgentConfig  # noqa: E402
from kforge_nb.evaluator import EvalOptions  # noqa: E402
from kforge_nb.executors import InProcess  # noqa: E402
from kforge_nb.problem import Problem  # noqa: E402
from kforge_nb.session import Attempt, Budget, Session  # noqa: E402
from kforge_nb.session.core import with_allowed  # noqa: E402
from kforge_nb.session.search import make_search  # noqa: E402
from kforge_nb.targets import get_target  # noqa: E402
from random_problems import write_draw  # noqa: E402

MARGIN = 1.02


def search_run(problem: Problem, strategy: str, args, out: Path) -> Session:
    session = Session(problem, args.target, AgentConfig(provider="builtin"),
                      Budget(iterations=args.iterations, samples=args.samples, patience=None,
                             confirm=args.confirm),
                      EvalOptions(trials=2, baselines=("eager",)), out=out / strategy,
                      search=make_search(strategy, None if strategy == "greedy" else args.beam))
    session.run()
    return session


def kernel_of(attempt: Attempt) -> tuple[str, list[str]]:
    """A best candidate's code and the torch ops its agent kept on purpose."""
    return attempt.code, attempt.generation.kept_ops if attempt.generation else []


def head_to_head(problem: Problem, kernels: dict[str, tuple[str, list[str]]], args,
                 out: Path) -> dict[str, float]:
    """Median speedup vs eager of each named kernel (code, kept ops), judged in turn
    `args.rounds` times (with the kept torch ops allowed, as in its session)."""
    target, executor = get_target(args.target), InProcess()
    speedups: dict[str, list[float]] = {name: [] for name in kernels}
    names = list(kernels)
    for k in range(args.rounds):
        for name in names[k % len(names):] + names[:k % len(names)]:    # rotate the order
            code, kept = kernels[name]
            options = with_allowed(EvalOptions(trials=1, baselines=("eager",)), kept)
            result = executor.evaluate(problem, code, target, options,
                                       out / "h2h" / f"{name}-{k}")
            if result.state != "correct":
                print(f"{problem.name}: {name}'s best is {result.state} when judged again: "
                      f"{result.message[:200]}", file=sys.stderr)
            if result.timing.speedup_vs_eager:
                speedups[name].append(result.timing.speedup_vs_eager)
    return {name: statistics.median(v) for name, v in speedups.items() if v}


def verdict(ratio: float | None) -> str:
    if ratio is None:
        return "-"
    return "faster" if ratio >= MARGIN else "slower" if ratio <= 1 / MARGIN else "tie"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True, help="the draw's seed")
    parser.add_argument("--draw", type=int, default=12)
    parser.add_argument("--target", default="cpp")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--beam", type=int, default=2)
    parser.add_argument("--strategies", default="greedy,beam,evolve")
    parser.add_argument("--confirm", type=int, default=3,
                        help="finalists of every strategy's final judging (0: none)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scale", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--out", default="kforge-runs/search")
    parser.add_argument("--jsonl")
    parser.add_argument("--shard", default="0/1", help="K/N: every N-th problem from the K-th")
    parser.add_argument("--only", help="these problems of the draw, e.g. 1,3 (its indices; a "
                        "run cut by a time limit goes on with the rest)")
    parser.add_argument("--report", nargs="+", metavar="JSONL",
                        help="only print the table of these rows files")
    if "--report" in sys.argv:
        reported = parser.parse_args(["--seed", "0", *sys.argv[1:]]).report
        rows = [json.loads(line) for path in reported for line in open(path) if line.strip()]
        rows.sort(key=lambda r: r["problem"])
        first = argparse.Namespace(**rows[0]["args"]) if rows else parser.parse_args(["--seed", "0"])
        print(report(rows, first.strategies.split(","), first))
        return
    args = parser.parse_args()
    shard, shards = (int(x) for x in args.shard.split("/"))
    strategies = args.strategies.split(",")
    if strategies[0] != "greedy":
        parser.error("--strategies must start with greedy (the others are compared with it)")
    out = Path(args.out)
    rows = []
    drawn = write_draw(out / f"draw-{args.seed}-{args.scale}", args.seed, args.draw, args.scale)
    picked = drawn[shard::shards] if not args.only else \
        [drawn[int(k)] for k in args.only.split(",")]
    for path in picked:
        problem = Problem.from_file(path)
        sessions = {s: search_run(problem, s, args, out / path.stem) for s in strategies}
        bests = {s: session.best for s, session in sessions.items()}
        codes = {s: b.code for s, b in bests.items() if b is not None}
        distinct = {}
        for s, code in codes.items():            # identical kernels are judged once
            distinct.setdefault(code, s)
        medians = head_to_head(problem, {s: kernel_of(bests[s]) for s in distinct.values()},
                               args, out / path.stem) if distinct else {}
        row = {"problem": path.stem, "candidates": {s: len(x.history)
                                                     for s, x in sessions.items()}}
        for s in strategies:
            twin = distinct.get(codes.get(s)) if s in codes else None
            row[s] = medians.get(twin) if twin else None
            if s != "greedy":
                same = s in codes and "greedy" in codes and codes[s] == codes["greedy"]
                ratio = 1.0 if same else (row[s] / row["greedy"]
                                          if row[s] and row.get("greedy") else None)
                row[f"{s}_vs_greedy"] = ratio
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
        if args.jsonl:
            with open(args.jsonl, "a") as f:
                f.write(json.dumps({**row, "seed": args.seed, "args": vars(args)}) + "\n")
    print(report(rows, strategies, args))


def report(rows: list[dict], strategies: list[str], args) -> str:
    others = strategies[1:]
    head = ["problem"] + [f"{s} x eager" for s in strategies] + \
        [f"{s}/greedy" for s in others] + ["candidates " + "/".join(strategies)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["problem"]] + [f"{r[s]:.2f}x" if r[s] else "-" for s in strategies]
        cells += [f"{r[f'{s}_vs_greedy']:.3f} {verdict(r[f'{s}_vs_greedy'])}"
                  if r[f"{s}_vs_greedy"] else "-" for s in others]
        cells.append("/".join(str(r["candidates"][s]) for s in strategies))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for s in others:
        ratios = [r[f"{s}_vs_greedy"] for r in rows if r[f"{s}_vs_greedy"]]
        wins = sum(verdict(x) == "faster" for x in ratios)
        losses = sum(verdict(x) == "slower" for x in ratios)
        lines.append(f"{s}: faster than greedy on {wins}/{len(rows)} problems, slower on "
                     f"{losses}, median ratio {statistics.median(ratios):.3f}" if ratios else
                     f"{s}: no comparable result")
    lines.append(f"(seed {args.seed}, {args.draw} problems at {args.scale} scale, target "
                 f"{args.target}, {args.iterations} rounds x {args.samples} samples, beam "
                 f"{args.beam}, final judging of {getattr(args, 'confirm', 0)}; head to head "
                 f"over {args.rounds} rounds, medians; margin "
                 f"{MARGIN:.2f})")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
