"""The real-world suite: the builtin agent over the fixed modules of benchmarks/realworld/
(Llama, Mistral/Mixtral, DeepSeek, Qwen, Gemma, Phi: norms, MLPs, RoPE, attention, kv cache,
MoE routing, quantisation) and, beside them, a seeded draw of modules composed from the same op
families that nothing was ever tuned on (benchmarks/realworld_draw.py). One table: each module
correct or not, its speedup vs eager and vs torch.compile, the cause where it is not correct,
the fixed and drawn parts side by side, and their totals.

GPU (serving sizes, H100; torch + triton, nothing else needed):

    python benchmarks/realworld.py --target triton --iterations 2 --seed 1127

CPU (the sizes divided by 16; slow on 2 cores):

    python benchmarks/realworld.py --target cpp --iterations 1 --shrink 16 --seed 1127

Each part is one `kforge bench --provider builtin` (resumable: the same command goes on where it
stopped); flags after `--` go to both benches (e.g. `-- --baseline max-autotune --workers 4`).
KFORGE_REALWORLD_SHRINK carries --shrink to the problem files (and the evaluator's workers).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from realworld_draw import draw  # noqa: E402

sys.path.insert(0, str(REPO))
from kforge_nb.baselines import common_mode, short_name  # noqa: E402
from kforge_nb.intervals import faster_than  # noqa: E402

FIXED = HERE / "realworld"
KFORGE = "import sys; from kforge_nb.cli import main; sys.exit(main())"


def bench(problems: Path, out: Path, args, extra: list[str]) -> list[dict]:
    """One `kforge bench` over `problems`, its progress shown as it goes; its rows."""
    command = [sys.executable, "-c", KFORGE, "bench", str(problems), "--provider", "builtin",
               "--target", args.target, "--iterations", str(args.iterations),
               "--out", str(out), "--json", *extra]
    env = {**os.environ, "KFORGE_REALWORLD_SHRINK": str(args.shrink),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    print("$ KFORGE_REALWORLD_SHRINK=%d kforge %s" % (args.shrink, " ".join(command[3:])),
          flush=True)
    last = ""
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) as run:
        for line in run.stdout:
            if line.startswith("{"):
                last = line
            else:
                print(line, end="", flush=True)
    if not last:
        raise SystemExit(f"kforge bench over {problems} printed no result (exit {run.returncode})")
    return json.loads(last)["rows"]


def cause(row: dict) -> str:
    """Why a row is not correct, in the evaluator's words (their first sentence)."""
    if row["state"] == "correct":
        return ""
    note = " ".join((row.get("note") or row["state"]).split())
    return note[:150] + ("..." if len(note) > 150 else "")


def speed(value, ci=None) -> str:
    """`1.29x (0.87-1.67)`: the speedup and its 95 % interval, where it has one."""
    if not value:
        return "-"
    return f"{value:.2f}x" + (f" ({ci[0]:.2f}-{ci[1]:.2f})" if ci else "")


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def totals(rows: list[dict]) -> dict:
    correct = [r for r in rows if r["state"] == "correct"]
    return {"modules": len(rows), "correct": len(correct),
            "vs_eager": geomean([r.get("speedup_vs_eager") for r in correct]),
            "vs_compile": geomean([r.get("speedup_vs_compile") for r in correct]),
            # faster as the project counts it: the 95 % interval's low end above 1x
            "faster_than_compile": sum(1 for r in correct if faster_than(
                r.get("speedup_vs_compile") or 0, r.get("speedup_vs_compile_ci")))}


def table(parts: dict[str, list[dict]]) -> str:
    """The Markdown table of every row, then one totals line per part."""
    compiled = short_name(common_mode(r for rows in parts.values() for r in rows))
    lines = [f"| part | module | correct | vs eager | vs {compiled} | cause where not correct |",
             "| --- | --- | --- | --- | --- | --- |"]
    for part, rows in parts.items():
        for r in rows:
            ok = r["state"] == "correct"
            eager, compiled_ = (speed(r.get(f"speedup_vs_{side}"), r.get(f"speedup_vs_{side}_ci"))
                                if ok else "-" for side in ("eager", "compile"))
            lines.append(f"| {part} | {r['id']} | {'yes' if ok else r['state']} | {eager} | "
                         f"{compiled_} | {cause(r).replace('|', '/')} |")
    lines += ["", f"| part | correct | geomean vs eager | geomean vs {compiled} | faster than "
              f"{compiled} (95 % interval above 1x) |", "| --- | --- | --- | --- | --- |"]
    for part, rows in parts.items():
        t = totals(rows)
        lines.append(f"| {part} | {t['correct']} / {t['modules']} | {speed(t['vs_eager'])} | "
                     f"{speed(t['vs_compile'])} | {t['faster_than_compile']} / {t['correct']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("--target", choices=("cpp", "triton"), required=True)
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--shrink", type=int, default=1,
                        help="divide the modules' sizes by this (16 for a small CPU)")
    parser.add_argument("--seed", type=int, default=None, help="the draw's seed (default: drawn)")
    parser.add_argument("--draw", type=int, default=8, help="how many drawn modules")
    parser.add_argument("--only", nargs="*", default=None,
                        help="fixed modules to run (file stems; default: all)")
    parser.add_argument("--out", type=Path, default=Path("kforge-realworld"))
    args, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]
    seed = args.seed if args.seed is not None else secrets.randbelow(10 ** 6)
    print(f"seed {seed}", flush=True)
    drawn_dir = args.out / f"drawn-{seed}"
    draw(seed, args.draw, drawn_dir)
    fixed = FIXED
    if args.only:
        fixed = Path(tempfile.mkdtemp(prefix="realworld-"))
        for name in args.only:
            (fixed / f"{name}.py").write_text((FIXED / f"{name}.py").read_text())
    parts = {"fixed": bench(fixed, args.out / "fixed", args, extra),
             f"drawn (seed {seed})": bench(drawn_dir, args.out / "drawn", args, extra)}
    print(table(parts))


if __name__ == "__main__":
    main()
