"""KernelBench problems shrunk to CPU size, the builtin agent's candidates judged for correctness.

For each problem file: its sizes are shrunk (kernelbench_shrink.py: the largest problem whose
reference runs within the budget; the op itself unchanged), the shrunk file is written to
OUT/shrunk/, and for each target the builtin agent's candidate of each kind is generated and
judged by the real evaluator (strict fp32, correctness only unless --time). One row per
(problem, target, kind) goes to OUT/results.jsonl as it finishes; a second run skips the rows
already there. Problem files are test data, not part of this repository.

    PYTHONPATH=. python benchmarks/kernelbench_small.py /tmp/kb/KernelBench --levels 1 2 \
        --target cpp --target triton --jobs 2 --out /tmp/kb-small

`--pick` names problems always run (substring match), `--draw N --seed S` adds a seeded random
draw of N others; neither: every problem. `--kinds initial,fix,variant1` also judges the fix
(conservative) candidate and the sweep's variants. `--report` prints the tables of an OUT's rows
without running anything. Triton runs under its interpreter where there is no GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]
if not Path("/dev/nvidiactl").exists():      # read by Triton when it is first imported
    os.environ.setdefault("TRITON_INTERPRET", "1")

from kernelbench_classes import ORDER, op_class  # noqa: E402
from kernelbench_shrink import MAX_ELEMENTS, MAX_SECONDS, find_shrink  # noqa: E402

BUGS = ("mismatch", "compile_failure", "runtime_error", "generation_crash", "rejected")


# --- which problems ---------------------------------------------------------------------------
def problem_files(folders: list[str], levels: list[int]) -> list[tuple[str, Path]]:
    """(id, file) for every problem: `level1/19_ReLU`. A folder holding level1/, level2/, ...
    gives the levels asked for; a level folder gives its own files."""
    found = []
    for folder in map(Path, folders):
        subs = [folder / f"level{n}" for n in levels if (folder / f"level{n}").is_dir()]
        for level in subs or [folder]:
            found += [(f"{level.name}/{f.stem}", f) for f in sorted(level.glob("*.py"))
                      if not f.name.startswith("_")]
    return sorted(found, key=lambda p: natural(p[0]))


def natural(id: str):
    level, _, name = id.partition("/")
    number = name.split("_", 1)[0]
    return (level, int(number) if number.isdigit() else 10 ** 9, name)


def choose(files: list[tuple[str, Path]], pick: list[str], draw: int, seed: int):
    if not pick and not draw:
        return files
    picked = [p for p in files if any(s in p[0] for s in pick)]
    rest = [p for p in files if p not in picked]
    return picked + random.Random(seed).sample(rest, min(draw, len(rest)))


# --- one problem, in a job process ----------------------------------------------------------
def shrunk_problem(id: str, path: Path, out: Path, budget: tuple[int, float]) -> dict:
    """The shrink of one problem, written once to OUT/shrunk/ and read back on a later run."""
    meta_file = out / "shrunk" / f"{id}.json"
    if meta_file.is_file():
        return json.loads(meta_file.read_text())
    found = find_shrink(path.read_text(), *budget)
    meta = {k: v for k, v in found.items() if k != "source"}
    if "source" in found:
        meta["file"] = str(out / "shrunk" / f"{id}.py")
        Path(meta["file"]).parent.mkdir(parents=True, exist_ok=True)
        Path(meta["file"]).write_text(found["source"])
    meta_file.parent.mkdir(parents=True, exist_ok=True)
    meta_file.write_text(json.dumps(meta))
    return meta


def request_for(problem, target: str, kind: str, previous: str | None):
    from kforge_nb.agents.base import GenerationRequest
    if kind.startswith("variant"):
        return GenerationRequest(problem, target, "initial", variant=int(kind[7:] or 1))
    return GenerationRequest(problem, target, kind, previous_code=previous)


def judged(problem, target: str, kind: str, generation, settings: dict, folder: Path) -> dict:
    from kforge_nb.evaluator import EvalOptions, evaluate
    from kforge_nb.guardrails import Guardrails
    options = EvalOptions(trials=settings["trials"], timeout_s=settings["timeout"],
                          precision="strict", baselines=("eager",),
                          guardrails=Guardrails(allow=list(generation.kept_ops),
                                                precision="strict"),
                          measure=settings["time"], timing_budget_s=0.2, timing_rounds=3,
                          out_dir=folder.parent)
    result = evaluate(problem, generation.code, target, options, folder)
    c = result.correctness
    return {"state": result.state, "message": "" if result.ok else result.message[:600],
            "max_abs_error": c.max_abs_error, "max_rel_error": c.max_rel_error,
            "rel_norm_error": c.rel_norm_error, "failed_check": c.failed_check,
            "speedup_vs_eager": result.timing.speedup_vs_eager if settings["time"] else None,
            "artifacts": result.artifacts}


def candidate_row(problem, target: str, kind: str, previous: str | None, settings: dict,
                  folder: Path) -> tuple[dict, str | None]:
    """One (target, kind): generated, then judged; and the code, for a later `fix`."""
    from kforge_nb.agents.builtin.generator import BuiltinGenerator
    started = time.monotonic()
    try:
        generation = BuiltinGenerator().generate(request_for(problem, target, kind, previous))
    except Exception as err:                 # a generator that raises is a bug of its own
        return {"state": "generation_crash", "message": f"{type(err).__name__}: {err}\n"
                + traceback.format_exc()[-600:], "gen_s": round(time.monotonic() - started, 2)
                }, None
    gen_s = round(time.monotonic() - started, 2)
    if generation.code is None:
        return {"state": "generation_failure", "message": (generation.failure or "")[:600],
                "gen_s": gen_s}, None
    row = judged(problem, target, kind, generation, settings, folder)
    return {**row, "gen_s": gen_s, "eval_s": round(time.monotonic() - started - gen_s, 2),
            "notes": generation.notes[:300]}, generation.code


def run_problem(id: str, path: str, todo: list[tuple[str, str]], settings: dict) -> list[dict]:
    """Every asked (target, kind) row of one problem."""
    from kforge_nb.problem import Problem, ProblemError
    out = Path(settings["out"])
    started = time.monotonic()
    meta = shrunk_problem(id, Path(path), out, (settings["max_elements"], settings["max_seconds"]))
    base = {"problem": id, "class": op_class(id), "shrink_factor": meta.get("factor"),
            "shrink": meta.get("changed"), "elements": meta.get("elements"),
            "reference_s": meta.get("seconds"), "within_budget": meta.get("within_budget")}
    if "error" in meta:
        return [{**base, "target": t, "kind": k, "state": "shrink_failure",
                 "message": meta["error"][:600], "seconds": 0.0} for t, k in todo]
    try:
        problem = Problem.from_file(meta["file"])
    except ProblemError as err:
        return [{**base, "target": t, "kind": k, "state": "bad_problem",
                 "message": str(err)[:600], "seconds": 0.0} for t, k in todo]
    rows, codes = [], {}
    for target, kind in todo:
        begun = time.monotonic()
        folder = out / "evals" / id / f"{target}-{kind}"
        row, code = candidate_row(problem, target, kind, codes.get(target), settings, folder)
        if kind == "initial":
            codes[target] = code
        rows.append({**base, "target": target, "kind": kind, **row,
                     "seconds": round(time.monotonic() - begun, 2)})
    return rows


# --- the tables --------------------------------------------------------------------------------
def by_state(rows: list[dict]) -> str:
    targets = sorted({r["target"] for r in rows})
    states = sorted({r["state"] for r in rows}, key=lambda s: (s != "correct", s))
    lines = ["| state | " + " | ".join(targets) + " |", "|---|" + "---:|" * len(targets)]
    for state in states:
        lines.append(f"| {state} | " + " | ".join(
            str(sum(r["state"] == state and r["target"] == t for r in rows)) for t in targets)
            + " |")
    lines.append("| **problems** | " + " | ".join(
        str(sum(r["target"] == t for r in rows)) for t in targets) + " |")
    return "\n".join(lines)


def by_class(rows: list[dict]) -> str:
    """Per op class and target: correct / no kernel generated / a kernel that is not correct."""
    targets = sorted({r["target"] for r in rows})
    head = "| class | problems | " + " | ".join(
        f"{t} correct | {t} no kernel | {t} broken" for t in targets) + " |"
    lines = [head, "|---|---:|" + "---:|---:|---:|" * len(targets)]
    classes = [c for c in ORDER if any(r["class"] == c for r in rows)] + ["all"]
    for cls in classes:
        mine = [r for r in rows if cls in ("all", r["class"])]
        cells = []
        for t in targets:
            of_t = [r for r in mine if r["target"] == t]
            correct = sum(r["state"] == "correct" for r in of_t)
            none = sum(r["state"] in ("generation_failure", "shrink_failure", "bad_problem")
                       for r in of_t)
            cells.append(f"{correct}/{len(of_t)} | {none} | {len(of_t) - correct - none}")
        lines.append(f"| {cls} | {len({r['problem'] for r in mine})} | " + " | ".join(cells)
                     + " |")
    return "\n".join(lines)


def left_to_torch(row: dict) -> list[str]:
    """The modules a correct candidate left to torch (its notes: `left to torch: Conv2d
    (self.conv), ...`): a correct problem, but not a kernel of the agent's own for all of it."""
    notes = row.get("notes") or ""
    if "left to torch: " not in notes:
        return []
    kept = re.sub(r"\([^)]*\)", "", notes.split("left to torch: ", 1)[1].split(";")[0])
    return [part.strip() for part in kept.split(",") if part.strip()]


def kept_line(rows: list[dict]) -> str:
    lines = []
    for target in sorted({r["target"] for r in rows}):
        correct = [r for r in rows if r["target"] == target and r["state"] == "correct"]
        kept = [op for r in correct for op in left_to_torch(r)]
        counts = ", ".join(f"{op} {kept.count(op)}" for op in sorted(set(kept)))
        lines.append(f"- {target}: {sum(bool(left_to_torch(r)) for r in correct)} of "
                     f"{len(correct)} correct leave a module to torch" +
                     (f" ({counts})" if counts else ""))
    return "\n".join(lines)


def bugs(rows: list[dict]) -> str:
    found = [r for r in rows if r["state"] in BUGS]
    return "\n".join(f"- {r['problem']} [{r['target']} {r['kind']}] {r['state']}: "
                     + " ".join(r.get("message", "").split())[:400] for r in found) or "- none"


def report(rows: list[dict]) -> str:
    kinds = sorted({r["kind"] for r in rows})
    parts = []
    for kind in kinds:
        mine = [r for r in rows if r["kind"] == kind]
        parts += [f"### kind: {kind}", "", by_state(mine), "", by_class(mine), "",
                  kept_line(mine), ""]
    shrunk = [r for r in rows if r.get("shrink_factor")]
    over = sorted({r["problem"] for r in shrunk if r.get("within_budget") is False})
    parts += [f"shrunk problems: {len({r['problem'] for r in shrunk})}; over the budget at "
              f"every size (smallest kept): {', '.join(over) or 'none'}", "",
              "### not correct, with a kernel (bugs)", "", bugs(rows)]
    return "\n".join(parts)


# --- the run ------------------------------------------------------------------------------------
def read_rows(path: Path) -> list[dict]:
    rows = []
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue                     # a line cut short by a kill: that row reruns
    return rows


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folders", nargs="+", help="KernelBench's KernelBench/ or level folders")
    p.add_argument("--levels", nargs="*", type=int, default=[1, 2])
    p.add_argument("--target", action="append", choices=("cpp", "triton"))
    p.add_argument("--kinds", default="initial", help="initial,fix,variant1,... (default initial)")
    p.add_argument("--pick", nargs="*", default=[])
    p.add_argument("--draw", type=int, default=0)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--jobs", type=int, default=1, help="problems judged at once (processes)")
    p.add_argument("--out", default="kforge-runs/kb-small")
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--timeout", type=float, default=120.0, help="seconds a candidate may take")
    p.add_argument("--time", action="store_true", help="also time correct candidates (briefly)")
    p.add_argument("--max-elements", type=int, default=MAX_ELEMENTS)
    p.add_argument("--max-seconds", type=float, default=MAX_SECONDS)
    p.add_argument("--report", action="store_true", help="print the tables of OUT and stop")
    return p.parse_args()


def main() -> None:
    args = parse()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    results = out / "results.jsonl"
    targets = args.target or ["cpp"]
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    chosen = choose(problem_files(args.folders, args.levels), args.pick, args.draw, args.seed)
    ids = {id for id, _ in chosen}
    if not args.report:
        done = {(r["problem"], r["target"], r["kind"]) for r in read_rows(results)}
        settings = {"out": str(out), "trials": args.trials, "timeout": args.timeout,
                    "time": args.time, "max_elements": args.max_elements,
                    "max_seconds": args.max_seconds}
        work = [(id, path, [(t, k) for t in targets for k in kinds if (id, t, k) not in done])
                for id, path in chosen]
        work = [w for w in work if w[2]]
        print(f"{len(chosen)} problems, {len(work)} to run ({len(chosen) - len(work)} done "
              f"in {results})", flush=True)
        run_all(work, settings, results, args.jobs)
    rows = [r for r in read_rows(results) if r["problem"] in ids
            and r["target"] in targets and r["kind"] in kinds]
    print(report(rows))


def run_all(work: list, settings: dict, results: Path, jobs: int) -> None:
    """Each problem's rows appended as it finishes; with --jobs 1 in this process (the
    references run in the shrink's child process, the candidates in the evaluator's)."""
    if jobs <= 1:
        for n, (id, path, todo) in enumerate(work, 1):
            save(results, id, run_problem(id, str(path), todo, settings), f"{n}/{len(work)}")
        return
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(run_problem, id, str(path), todo, settings): id
                   for id, path, todo in work}
        for n, future in enumerate(as_completed(futures), 1):
            try:
                rows = future.result()
            except Exception as err:         # the job process died: nothing saved, it reruns
                print(f"[{n}/{len(work)}] {futures[future]}: job failed: {err}", flush=True)
                continue
            save(results, futures[future], rows, f"{n}/{len(work)}")


def save(results: Path, id: str, rows: list[dict], count: str) -> None:
    with open(results, "a") as f:
        for row in rows:
            f.write(json.dumps(row, default=str) + "\n")
    print(f"[{count}] {id}: " + ", ".join(
        f"{r['target']}/{r['kind']} {r['state']} {r.get('seconds', 0):.0f}s" for r in rows),
        flush=True)


if __name__ == "__main__":
    main()
