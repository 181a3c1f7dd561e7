"""The tables of a KernelBench bench: per op class and overall, the whole beside a seeded draw.

    python benchmarks/kernelbench_table.py kforge-runs/kb-gpu/bench-kb-triton-builtin \
        [--problems kforge-runs/kb] [--draw 40 --seed 20261126]

Reads the bench folder's results.jsonl (`kforge bench` rows). Per op class
(kernelbench_classes.py): problems, finished, correct % (of the finished), faster than
torch.compile % (of the finished: correct with the speedup's 95 % interval above 1, as
fast_p counts; and by the point estimate alone), geomean speedup vs eager and vs
torch.compile (over correct rows with real timings). The draw (`--draw N --seed S` over every problem of `--problems`, or of the rows when
not given) is the part nobody tuned on. Then every finished problem that is not correct, and
every correct one below 0.98x eager, with what its row says.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from kernelbench_classes import ORDER, drawn, op_class  # noqa: E402
from kforge_nb.bench.report import fast_p, geomean, row_from_dict  # noqa: E402

SLOW = 0.98


def cells(rows: list, total: int) -> list[str]:
    finished = len(rows)
    correct = [r for r in rows if r.correct]
    timed = [r for r in correct if r.real]
    faster = fast_p(rows, 1.0, "compile") if rows else None
    point = sum((r.speedup_vs_compile or 0) > 1 for r in timed) / finished if finished else None
    gm_eager = geomean([r.speedup_vs_eager for r in timed])
    gm_compile = geomean([r.speedup_vs_compile for r in timed])
    return [f"{finished}/{total}",
            f"{len(correct) / finished:.0%}" if finished else "-",
            f"{faster:.0%}" if faster is not None else "-",
            f"{point:.0%}" if point is not None and timed else "-",
            f"{gm_eager:.2f}x" if gm_eager else "-",
            f"{gm_compile:.2f}x" if gm_compile else "-"]


def class_table(rows: list, problems: list[str], title: str) -> str:
    head = ["finished", "correct", "faster than compile", "(by the point)",
            "geomean x eager", "geomean x compile"]
    lines = [f"#### {title}", "", "| class | " + " | ".join(head) + " |",
             "|---|" + "---:|" * len(head)]
    classes = [c for c in ORDER if any(op_class(p) == c for p in problems)]
    for cls in classes + ["all"]:
        mine = [r for r in rows if cls in ("all", op_class(r.id))]
        total = sum(cls in ("all", op_class(p)) for p in problems)
        label = f"**{cls}**" if cls == "all" else cls
        lines.append(f"| {label} | " + " | ".join(cells(mine, total)) + " |")
    return "\n".join(lines)


def failures(rows: list) -> str:
    bad = [r for r in rows if not r.correct]
    slow = [r for r in rows if r.correct and r.real and (r.speedup_vs_eager or 0) < SLOW]
    lines = [f"- {r.id}: {r.state}: {' '.join(r.note.split())[:300]}" for r in bad]
    lines += [f"- {r.id}: {r.speedup_vs_eager:.2f}x eager, "
              f"{(r.speedup_vs_compile or 0):.2f}x compile: {' '.join(r.note.split())[:200]}"
              for r in slow]
    return "\n".join(lines) or "- none"


def tables(row_dicts: list[dict], problems: list[str], draw: int, seed: int) -> str:
    rows = [row_from_dict(d) for d in row_dicts]
    problems = sorted(set(problems) | {r.id for r in rows})
    part = drawn(problems, draw, seed)
    in_part = [r for r in rows if r.id in part]
    return "\n\n".join([
        class_table(rows, problems, f"all problems ({len(problems)})"),
        class_table(in_part, sorted(part), f"seeded draw: {len(part)} problems, seed {seed}"),
        f"#### not correct, or correct below {SLOW}x eager", failures(rows)])


def read_rows(folder: Path) -> list[dict]:
    rows = {}
    for line in (folder / "results.jsonl").read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if row.get("state") not in ("engine_error", "interrupted"):
            rows[row["id"]] = row            # the last line of a problem is its row
    return list(rows.values())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bench", help="the bench's folder (holding results.jsonl)")
    p.add_argument("--problems", help="the problem folder the bench ran (for the draw)")
    p.add_argument("--draw", type=int, default=40)
    p.add_argument("--seed", type=int, default=20261126)
    args = p.parse_args()
    problems = []
    if args.problems:
        from kforge_nb.bench.suite import entries
        problems = [e.id for e in entries([args.problems])]
    print(tables(read_rows(Path(args.bench)), problems, args.draw, args.seed))


if __name__ == "__main__":
    main()
