"""An idle GPU's figures before and after the head-to-head change (issue 35), judged on the device.

The same candidates are judged by two copies of the evaluator: BEFORE (a worktree of 69ec319,
before the rival and the busy CPU's low-quantile figures) and AFTER (a worktree of the commit
under test). Each copy runs in its own python process (PYTHONPATH pointing at it, so every
worker the evaluator starts imports that copy too), kept alive for the whole run and asked for
one judging at a time, so each problem is judged BEFORE, AFTER, BEFORE, AFTER back to back
(strict fp32, 2 correctness trials, timed against eager only, EvalOptions' default timing
budget). Then AFTER judges, timed beside a rival (EvalOptions.rival):

* the candidate against its own code (a kernel against itself: the head-to-head should be a
  tie near 1.0x);
* the builtin agent's second sample (variant 1: other knobs) against the first; its ratio
  (the first's time over the second's) should agree with the two kernels' own speedups over
  eager (the second's from that judging, the first's from AFTER's two plain judgings).

On a GPU nothing is judged busy, so without a rival the speedup over eager must come out as
before: the two copies' intervals should overlap as much as one copy's two judgings do.

Test data (never in this repository): a folder holding problems/*.py (KernelBench files) and
candidates/<problem>__v0.py, <problem>__v1.py plus candidates/meta.json (the builtin agent's
kept_ops for the guardrails), made on any machine by

    PYTHONPATH=AFTER python3 benchmarks/gpu_before_after.py --generate DATA

Run (writes rows.jsonl, table.md and a log per copy under OUT):

    PYTHONUNBUFFERED=1 python3 benchmarks/gpu_before_after.py DATA OUT \\
        --before build/kforge-before --after build/kforge-after --seconds 420
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

TIMING = ("candidate_ms", "eager_ms", "speedup_vs_eager", "speedup_vs_eager_ci", "rounds",
          "noisy", "busy", "real", "note", "device", "versus", "candidate_low_ms")


# --- the worker: one copy of the evaluator, one judging per request ----------------------------

def serve() -> int:
    """Read one JSON request a line on stdin, answer one JSON line on stdout."""
    import kforge_nb
    from kforge_nb.evaluator import EvalOptions, evaluate
    from kforge_nb.guardrails import Guardrails
    from kforge_nb.problem import Problem
    reply = sys.stdout
    sys.stdout = sys.stderr                   # whatever the evaluator prints goes to the log
    reply.write(json.dumps({"ready": kforge_nb.__file__}) + "\n")
    reply.flush()
    for line in sys.stdin:
        ask = json.loads(line)
        began = time.monotonic()
        try:
            problem = Problem.from_file(ask["problem"])
            extra = {"rival": Path(ask["rival"]).read_text(), "rival_id": ask["rival_id"]} \
                if ask.get("rival") else {}
            options = EvalOptions(baselines=("eager",), trials=2, timeout_s=300,
                                  out_dir=Path(tempfile.mkdtemp()),
                                  guardrails=Guardrails(allow=ask.get("kept_ops") or []),
                                  **extra)
            result = evaluate(problem, Path(ask["candidate"]).read_text(), "triton", options)
            row = {"state": result.state, "message": (result.message or "")[:600],
                   "elapsed_s": result.elapsed_s}
            if result.timing is not None:
                row.update({k: getattr(result.timing, k, None) for k in TIMING})
        except Exception:
            row = {"state": "crash", "message": traceback.format_exc()[-1500:]}
        row["wall_s"] = round(time.monotonic() - began, 2)
        reply.write(json.dumps(row, default=str) + "\n")
        reply.flush()
    return 0


class Copy:
    """A long-lived worker process on one copy of the code."""

    def __init__(self, label: str, code: Path, log: Path):
        self.label = label
        env = {**os.environ, "PYTHONPATH": str(code.resolve()), "PYTHONUNBUFFERED": "1"}
        self.log = open(log, "w")
        self.process = subprocess.Popen([sys.executable, str(Path(__file__).resolve()),
                                         "--serve"], env=env, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.log, text=True,
                                        cwd=tempfile.mkdtemp())
        self.ready = json.loads(self.process.stdout.readline())["ready"]
        assert str(code.resolve()) in self.ready, (label, self.ready)

    def judge(self, **ask) -> dict:
        said = {k: Path(v).name if isinstance(v, str) else v for k, v in ask.items()
                if k != "kept_ops"}
        self.log.write(f"\n=== {json.dumps(said)}\n")
        self.log.flush()
        self.process.stdin.write(json.dumps(ask) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        return json.loads(line) if line else {"state": "worker died"}

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)
        self.log.close()


# --- the run ------------------------------------------------------------------------------------

def overlap(a, b) -> bool | None:
    if not a or not b:
        return None
    return a[0] <= b[1] and b[0] <= a[1]


def run(a) -> int:
    data, out = Path(a.data), Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = json.loads((data / "candidates" / "meta.json").read_text())
    deadline = time.time() + a.seconds
    started = time.time()
    copies = {"before": Copy("before", Path(a.before), out / "log-before.txt"),
              "after": Copy("after", Path(a.after), out / "log-after.txt")}
    print("before:", copies["before"].ready, "\nafter: ", copies["after"].ready, flush=True)
    rows = []
    problems = [f for f in sorted((data / "problems").glob("*.py"))
                if any(o in f.stem for o in a.only.split(","))]
    with open(out / "rows.jsonl", "w") as sink:
        for path in problems:
            if time.time() > deadline:
                print("deadline: not started", path.stem, flush=True)
                continue
            v0 = data / "candidates" / f"{path.stem}__v0.py"
            v1 = data / "candidates" / f"{path.stem}__v1.py"
            plan = [(label, v0, None) for _ in range(a.pairs) for label in ("before", "after")]
            if not a.no_rival:
                plan.append(("after", v0, v0))
                if v1.exists():
                    plan.append(("after", v1, v0))
            row = {"problem": path.stem, "judgings": []}
            for label, cand, rival in plan:
                ask = {"problem": str(path.resolve()), "candidate": str(cand.resolve()),
                       "kept_ops": meta.get(cand.name, {}).get("kept_ops", [])}
                if rival is not None:
                    ask.update(rival=str(rival.resolve()), rival_id=rival.stem)
                judged = copies[label].judge(**ask)
                judged.update(copy=label, candidate=cand.stem[-2:],
                              rival=rival.stem[-2:] if rival is not None else "")
                row["judgings"].append(judged)
                print(f"{path.stem:40s} {label:6s} {judged['candidate']} "
                      f"rival={judged['rival'] or '-':3s} {judged['state']:10s} "
                      f"{fmt(judged.get('speedup_vs_eager'))} "
                      f"{ci(judged.get('speedup_vs_eager_ci'))} "
                      f"versus={short(judged.get('versus'))} {judged.get('wall_s')} s", flush=True)
            rows.append(row)
            sink.write(json.dumps(row, default=str) + "\n")
            sink.flush()
    for c in copies.values():
        c.close()
    table = render(rows, time.time() - started)
    (out / "table.md").write_text(table)
    print(table)
    return 0


def fmt(x, digits=3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def ci(c) -> str:
    return "[-]" if not c else f"[{c[0]:.3f}, {c[1]:.3f}]"


def short(v) -> str:
    if not v:
        return "-"
    if v.get("verdict") == "void":
        return f"void ({v.get('why', '')[:80]})"
    return f"{v['ratio']:.3f} {ci(v['ci'])} {v['verdict']} (noise {v['noise']:.3f})"


# a kernel against itself never agrees to better than this (stats.SELF_NOISE_FLOOR of the
# after code): a before/after gap under it, or under the copies' own spread, is no change
NOISE_FLOOR = 0.01


def verdict_of(ratio: float, noise: float) -> str:
    """stats.head_to_head's rule on a point alone: off 1x by more than the noise, or a tie."""
    return "faster" if ratio > 1 + noise else "slower" if ratio < 1 / (1 + noise) else "tie"


def render(rows: list[dict], total_s: float) -> str:
    """Two tables: the speedup over eager before and after (no rival), and the head-to-heads.

    Unchanged, for a problem: the hulls of the two copies' intervals overlap and the gap
    between their mean speedups is within the larger of the copies' own spread (fastest
    judging over slowest) and the 1 % a kernel never agrees with itself to better than.
    Pairwise overlap of single intervals is shown too: at +-0.05 % intervals it fails within
    one copy as well. A head-to-head agrees with the kernels' own speedups when the duel's
    ratio (the rival's time over the candidate's) is within the duel's noise of the ratio of
    their speedups (v1's from its judging, v0's the mean of AFTER's plain judgings) and gives
    the same verdict."""
    one = ("| problem | state B / A | before: speedup vs eager [95 % CI], each judging | after | "
           "after / before | spread B, A | CIs overlap B-A (B-B, A-A) | unchanged | "
           "s a judging: median (first) |\n|---|---|---|---|---|---|---|---|---|\n")
    two = ("| problem | self head-to-head (v0 vs v0): ratio [CI] verdict | v1 vs v0: ratio [CI] "
           "verdict | v1 / v0 from own speedups (expected verdict) | agrees |\n"
           "|---|---|---|---|---|\n")
    lines1, lines2, same, ties, duel_ok = [], [], [], [], []
    for row in rows:
        j = row["judgings"]
        plain = {"before": [x for x in j if x["copy"] == "before"],
                 "after": [x for x in j if x["copy"] == "after" and not x["rival"]]}
        self_duel = next((x for x in j if x["rival"] == "v0" and x["candidate"] == "v0"), None)
        v1 = next((x for x in j if x["candidate"] == "v1"), None)
        sp = {k: [x.get("speedup_vs_eager") for x in v] for k, v in plain.items()}
        cis = {k: [x.get("speedup_vs_eager_ci") for x in v] for k, v in plain.items()}
        mean = lambda xs: statistics.mean(xs) if xs and all(xs) else None  # noqa: E731
        spread = lambda xs: max(xs) / min(xs) - 1 if len(xs) >= 2 and all(xs) else None  # noqa
        hull = lambda cs: [min(c[0] for c in cs), max(c[1] for c in cs)] \
            if cs and all(cs) else None  # noqa: E731
        count = lambda ps: f"{sum(1 for p in ps if p)}/{len(ps)}"  # noqa: E731
        ratio = mean(sp["after"]) / mean(sp["before"]) \
            if mean(sp["after"]) and mean(sp["before"]) else None
        spreads = [spread(sp["before"]), spread(sp["after"])]
        unchanged = None
        if ratio is not None and None not in spreads and hull(cis["before"]) \
                and hull(cis["after"]):
            unchanged = bool(overlap(hull(cis["before"]), hull(cis["after"]))) and \
                abs(ratio - 1) <= max(spreads + [NOISE_FLOOR])
            same.append(unchanged)
        between = [overlap(b, c) for b in cis["before"] for c in cis["after"]]
        inside = [[overlap(c, d) for i, c in enumerate(cis[k]) for d in cis[k][i + 1:]]
                  for k in ("before", "after")]
        secs = [x.get("wall_s") for x in j if x.get("wall_s")]
        per_judging = f"{statistics.median(secs):.1f} (first {secs[0]:.1f})" if secs else "-"
        states = "/".join(sorted({x["state"] for x in plain["before"]})) + " / " + \
            "/".join(sorted({x["state"] for x in plain["after"]}))
        pct = lambda x: "-" if x is None else f"{100 * x:.2f} %"  # noqa: E731
        lines1.append(
            f"| {row['problem']} | {states} | "
            + "; ".join(f"{fmt(s)} {ci(c)}" for s, c in zip(sp["before"], cis["before"]))
            + " | " + "; ".join(f"{fmt(s)} {ci(c)}" for s, c in zip(sp["after"], cis["after"]))
            + f" | {fmt(ratio, 4)} | {pct(spreads[0])}, {pct(spreads[1])} | {count(between)} "
            f"({count(inside[0])}, {count(inside[1])}) | "
            f"{'yes' if unchanged else 'NO' if unchanged is False else '-'} | {per_judging} |")
        sv = self_duel.get("versus") if self_duel else None
        if sv and sv.get("verdict") != "void":
            ties.append(sv["verdict"] == "tie" and abs(sv["ratio"] - 1) <= sv["noise"])
        dv = v1.get("versus") if v1 else None
        expect, agrees, expected_verdict = None, None, ""
        if dv and dv.get("verdict") != "void" and v1.get("speedup_vs_eager") \
                and mean(sp["after"]):
            expect = v1["speedup_vs_eager"] / mean(sp["after"])
            expected_verdict = verdict_of(expect, dv["noise"])
            agrees = abs(dv["ratio"] / expect - 1) <= dv["noise"] and \
                expected_verdict == dv["verdict"]
            duel_ok.append(agrees)
        lines2.append(f"| {row['problem']} | {short(sv)} | {short(dv)} | {fmt(expect)} "
                      f"({expected_verdict or '-'}) | "
                      f"{'yes' if agrees else 'NO' if agrees is False else '-'} |")
    summary = (f"\nproblems: {len(rows)}; speedup vs eager unchanged on "
               f"{sum(1 for x in same if x)} of {len(same)}; a kernel against itself a tie "
               f"near 1x on {sum(ties)} of {len(ties)}; v1-vs-v0 head-to-head agrees with the "
               f"two kernels' own speedups on {sum(1 for x in duel_ok if x)} of {len(duel_ok)}"
               + (f"; total {total_s:.0f} s" if total_s else "") + "\n")
    return one + "\n".join(lines1) + "\n\n" + two + "\n".join(lines2) + "\n" + summary


def generate(data: Path) -> int:
    """The builtin agent's first two samples (variant 0 and 1) for every problems/*.py."""
    from kforge_nb.agents.base import GenerationRequest
    from kforge_nb.agents.builtin.generator import BuiltinGenerator
    from kforge_nb.problem import Problem
    folder = data / "candidates"
    folder.mkdir(exist_ok=True)
    meta = {}
    for path in sorted((data / "problems").glob("*.py")):
        problem = Problem.from_file(path)
        for variant in (0, 1):
            made = BuiltinGenerator().generate(GenerationRequest(problem, "triton", "initial",
                                                                 variant=variant))
            print(path.stem, variant, (made.notes or made.failure or "")[:160])
            if made.code:
                name = f"{path.stem}__v{variant}.py"
                (folder / name).write_text(made.code)
                meta[name] = {"problem": path.stem, "variant": variant,
                              "kept_ops": list(made.kept_ops), "notes": made.notes,
                              "variation": made.variation}
    (folder / "meta.json").write_text(json.dumps(meta, indent=1))
    return 0


def main() -> int:
    if sys.argv[1:] == ["--serve"]:
        return serve()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", help="problems/ and candidates/ (see the docstring)")
    ap.add_argument("out", nargs="?", default="gpu-before-after")
    ap.add_argument("--before", default="build/kforge-before")
    ap.add_argument("--after", default="build/kforge-after")
    ap.add_argument("--seconds", type=float, default=420, help="start no problem after this")
    ap.add_argument("--only", default="", help="only problems whose name holds one of these (a,b)")
    ap.add_argument("--pairs", type=int, default=2, help="BEFORE, AFTER judgings this many times")
    ap.add_argument("--no-rival", action="store_true", help="no judgings beside a rival")
    ap.add_argument("--generate", action="store_true", help="write the candidates and stop")
    ap.add_argument("--render", action="store_true", help="the table again from OUT/rows.jsonl")
    a = ap.parse_args()
    if a.generate:
        return generate(Path(a.data))
    if a.render:
        rows = [json.loads(x) for x in open(Path(a.out) / "rows.jsonl") if x.strip()]
        print(render(rows, 0))
        return 0
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
