"""Decompose every model in a folder (e.g. KernelBench level 3) and print what was found.

    python benchmarks/model_sweep.py KernelBench/level3 --device cuda [--jsonl rows.jsonl]

Per model: whether torch.fx traced it, the distinct parts and the calls of parts in its
forward, how far the parts' own code run in order is from the model's output (0 = exact), the
forward's time as the parts measured it, and the biggest part. The folder is used as test data;
nothing here is tuned on it.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kforge_nb.model import ModelError, decompose  # noqa: E402
from kforge_nb.problem import Problem, ProblemError  # noqa: E402


def natural(path: Path):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.name)]


def sweep(folder: Path, device: str, timeout_s: float) -> list[dict]:
    rows = []
    for path in sorted(folder.glob("*.py"), key=natural):
        started = time.monotonic()
        row = {"model": path.stem}
        try:
            with tempfile.TemporaryDirectory() as scratch:
                found = decompose(Problem.from_file(path), device, Path(scratch), repeats=3,
                                  timeout_s=timeout_s)
            biggest = max(found["parts"], key=lambda p: p["share"])
            row.update(ok=True, parts=len(found["parts"]), calls=len(found["steps"]),
                       nodes=found["nodes"], check=found["check"]["max_abs_error"],
                       ms=found["total_ms"], biggest=f"{biggest['label']} "
                       f"({biggest['share']:.0%})")
        except (ModelError, ProblemError) as err:
            lines = [line for line in str(err).splitlines() if line.strip()]
            row.update(ok=False, error=(lines[-1] if "Traceback" in str(err) else lines[0])[:160])
        row["seconds"] = round(time.monotonic() - started, 1)
        rows.append(row)
        print(line_of(row), flush=True)
    return rows


def line_of(r: dict) -> str:
    if not r["ok"]:
        return f"{r['model']:<42} FAILED  {r['error']}"
    return (f"{r['model']:<42} {r['parts']:>5} {r['calls']:>5} {r['check']:>9.2g} "
            f"{r['ms']:>9.3g}  {r['biggest'][:60]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--jsonl", type=Path)
    args = parser.parse_args()
    print(f"{'model':<42} {'parts':>5} {'calls':>5} {'max err':>9} {'ms':>9}  biggest part")
    rows = sweep(args.folder, args.device, args.timeout)
    ok = [r for r in rows if r["ok"]]
    exact = [r for r in ok if r["check"] == 0.0]
    print(f"\n{len(ok)}/{len(rows)} decomposed; {len(exact)} exactly (parts' code in order "
          f"gives the model's output bit for bit); median parts {sorted(r['parts'] for r in ok)[len(ok) // 2] if ok else '-'}")
    if args.jsonl:
        args.jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
