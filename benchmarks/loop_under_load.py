"""Does the agent loop keep the truly fastest kernel on a loaded 2-core CPU? The real loop
(`kforge run --target cpp --provider anthropic`, the real `anthropic` SDK) against a scripted
Messages API on 127.0.0.1 (tests/support/fake_anthropic.py), beside a chosen load.

    python benchmarks/loop_under_load.py [--patterns idle,busy2,bursty,compiler,membw]
                                         [--runs 3] [--seed 0] [--repo PATH] [--json FILE]
                                         [--size 1048576] [--truth-evals 4] [--truth FILE]

The scripted model proposes five correct C++ (OpenMP) kernels for y = 2x over `--size` floats,
in this order: the same kernel making 3, 2, 1, 2 and 3 passes over the data (each pass reads x
and writes y again, in its own parallel region, behind an asm memory barrier, so no pass can be
dropped); the scripted analyst gives one recommendation per round. The 1-pass kernel (the third
candidate) is the truly fastest; a 2-pass one is the second fastest. The run has 5 iterations
and no patience limit, so all five are judged. (y = 2x, not 2x + 1: eager's 2x + 1 allocates a
temporary and flips between ~0.5 and ~2.6 ms from one judging to the next on an idle machine,
as glibc hands its 4 MB back to the kernel or not; 2x is steady at ~0.25 ms.)

Before the loaded patterns, each kernel (1, 2, 3 passes) is judged `--truth-evals` times with
`kforge eval`, each judging after waiting (at most `--quiet-wait` s) for a second in which
others use at most `--quiet` of the cores: this machine is shared, nothing here is truly idle.
The "idle truth" is the median speedup vs eager of each kernel and, for each pair, the ratio of
the medians of their times, over the judgings the evaluator did not call busy (over all of them
where a kernel has fewer than two such). `--truth FILE` reuses the truth of an earlier
`--json FILE` (e.g. to judge before and after a change against the same truth), and
`--rescore FILE` prints the table of an earlier `--json FILE` again, running nothing (with
`--truth`: against that truth).

Load patterns, each started before a run and killed after it (by process group):
  idle      nothing of ours (other work on this machine goes on: it is not truly idle)
  busy2     two `python -c "while True: pass"`
  bursty    a neighbour on both cores: busy 0.3-1 s, idle 0.3-1 s, at random (--seed)
  compiler  g++ -O2 compiling a large generated C++ file, again and again
  membw     numpy copying a 256 MB array into another, again and again

Prints per pattern: runs; how often the kept best is the 1-pass kernel; how often a slower
kernel replaced a faster one as the best (walking the `evaluated` and `duel` events); how often a
displayed 95 % interval holds the idle truth, vs eager and head-to-head (`timing.versus`, where
the loop has it: the rival's time / the candidate's); correct kernels refused (state other than
correct); the mean run time. `--repo PATH` runs the loop (and the truth's `kforge eval`) from
another checkout of kforge_nb with this interpreter, e.g. main before a change:

    git -C /work/main worktree add /tmp/kforge-before 69ec319
    python benchmarks/loop_under_load.py --repo /tmp/kforge-before --patterns idle,busy2

`--patterns ''` measures the truth only (with `--json FILE`: for a later `--truth FILE`).

One run of the loop takes 70-115 s here (2 cores, with other people's tests beside it), the
truth 3-5 minutes: a default run (5 patterns x 3 runs) takes ~25-30 minutes.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))        # tests.support.fake_anthropic, from this checkout
from tests.support.fake_anthropic import FakeAnthropic  # noqa: E402

PATTERNS = ("idle", "busy2", "bursty", "compiler", "membw")
PASSES = (3, 2, 1, 2, 3)                    # the scripted candidates, in the order proposed

PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn({size})]


def get_init_inputs():
    return []
"""

PASS = """    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * 2.0f;
    asm volatile("" ::: "memory");
"""

KERNEL = '''import torch
import torch.nn as nn

from kforge_nb.runtime import cpp

source = r"""
#include <cstdint>

extern "C" void {name}(const float* x, float* y, int64_t n) {{
{passes}}}
"""

kernels = cpp.load(source)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        kernels.{name}(x, y, x.numel())
        return y
'''
NAME = re.compile(r"\btwice_p(\d)_")


def kernel(passes: int, tag: str) -> str:
    """The k-pass kernel; `tag` makes its text (so its compiled library) its own, so the loop
    judges two kernels of the same passes as two candidates and each run compiles its own."""
    return KERNEL.format(name=f"twice_p{passes}_{tag}", passes=PASS * passes)


def passes_of(code: str | None) -> int | None:
    match = NAME.search(code or "")
    return int(match.group(1)) if match else None


# --- the scripted model -----------------------------------------------------------------------

RECOMMENDATION = ("TITLE: {title}\nRECOMMENDATION: {text}\nEXPECTED GAIN: ~1.1x")
ADVICE = [("fewer passes", "fuse the passes over the data into fewer loops."),
          ("schedule", "try another OpenMP schedule for the elementwise loop."),
          ("vector width", "let the compiler pick a wider vector width for the loop."),
          ("alignment", "assume 64-byte aligned pointers in the inner loop."),
          ("prefetch", "prefetch the next cache lines of x ahead of the loop."),
          ("streaming stores", "use non-temporal stores for y.")]


class Script(list):
    """FakeAnthropic's script, answering by the request's kind: the next kernel for a
    generation request (its system prompt names the kernel engineer), the next recommendation
    for an analysis request. The server appends each request before it pops its step."""

    def __init__(self, server: FakeAnthropic, kernels: list[str]):
        super().__init__([None])             # never empty: the server asks `if script`
        self.server, self.kernels, self.advice = server, list(kernels), 0
        self.asked = {"generation": 0, "analysis": 0}

    def pop(self, index=0):
        body = self.server.requests[-1]["body"]
        if "kernel engineer" in json.dumps(body.get("system", "")):
            self.asked["generation"] += 1
            if not self.kernels:
                return {"text": "No further kernel."}         # a generation failure
            code = self.kernels.pop(0)
            return {"text": f"Here is the kernel.\n\n```python\n{code}```\n"}
        self.asked["analysis"] += 1
        title, text = ADVICE[self.advice % len(ADVICE)]
        self.advice += 1
        return {"text": RECOMMENDATION.format(title=title, text=text)}


# --- loads ------------------------------------------------------------------------------------

BURSTY = """import os, random, sys, time
rng = random.Random(int(sys.argv[1]))
t = time.monotonic()
os.fork()                    # two processes (both cores) on the same seeded schedule
while True:
    t += rng.uniform(0.3, 1.0)
    while time.monotonic() < t:
        pass
    t += rng.uniform(0.3, 1.0)
    time.sleep(max(0.0, t - time.monotonic()))
"""

MEMBW = """import numpy as np
a = np.ones(64 << 20, dtype=np.float32)          # 256 MB
b = np.empty_like(a)
while True:
    np.copyto(b, a)
"""


def big_cpp(functions: int = 400) -> str:
    """A C++ file that g++ -O2 takes some seconds over: many functions with loops to optimise,
    templates to instantiate."""
    parts = ["#include <vector>\n#include <map>\n#include <string>\n#include <algorithm>\n"
             "template <int N> struct Acc { static double f(const std::vector<double>& v) {\n"
             "  double s = 0; for (size_t i = 0; i < v.size(); ++i) s += v[i] * N + i % (N + 1);"
             "\n  return s + Acc<N - 1>::f(v); } };\n"
             "template <> struct Acc<0> { static double f(const std::vector<double>&) "
             "{ return 0; } };\n"]
    for i in range(functions):
        parts.append(
            f"double f{i}(const std::vector<double>& v, std::map<std::string, int>& m) {{\n"
            f"  std::vector<double> w(v.rbegin(), v.rend());\n"
            f"  std::sort(w.begin(), w.end());\n"
            f"  m[\"k{i}\"] += int(w.size());\n"
            f"  double s = Acc<{i % 12 + 4}>::f(w);\n"
            f"  for (size_t j = 1; j + 1 < w.size(); ++j) s += (w[j - 1] - 2 * w[j] + w[j + 1]) "
            f"* {i + 1};\n  return s;\n}}\n")
    return "".join(parts)


def start_load(pattern: str, seed: int, work: Path) -> list[subprocess.Popen]:
    """The pattern's processes, each the leader of a process group of its own."""
    py = sys.executable

    def spawn(*argv: str) -> subprocess.Popen:
        return subprocess.Popen(list(argv), start_new_session=True, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, cwd=work)
    if pattern == "idle":
        return []
    if pattern == "busy2":
        return [spawn(py, "-c", "while True: pass") for _ in range(2)]
    if pattern == "bursty":
        return [spawn(py, "-c", BURSTY, str(seed))]
    if pattern == "compiler":
        source = work / "big.cpp"
        if not source.exists():
            source.write_text(big_cpp())
        return [spawn("bash", "-c", f"while true; do g++ -O2 -c {source} -o {work}/big.o; "
                      "done")]
    if pattern == "membw":
        return [spawn(py, "-c", MEMBW)]
    raise SystemExit(f"unknown pattern {pattern!r}: one of {', '.join(PATTERNS)}")


def stop(procs: list[subprocess.Popen]) -> None:
    """Kill each process group we started (a group holds the leader and what it started:
    the bursty neighbour's fork, the compiler loop's g++), then reap the leader."""
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


RUNNING: list[subprocess.Popen] = []        # what is ours and alive: killed on the way out


def stop_all() -> None:
    stop(list(RUNNING))
    RUNNING.clear()


def on_signal(signum, frame):
    stop_all()
    raise SystemExit(128 + signum)


def cpu_busy(seconds: float = 1.0) -> float:
    """The share of all cores busy over `seconds` (/proc/stat): another user's load, read
    while nothing of ours runs."""
    def read():
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        return fields[3] + fields[4], sum(fields)       # idle + iowait, total
    idle0, total0 = read()
    time.sleep(seconds)
    idle1, total1 = read()
    return 1 - (idle1 - idle0) / max(1, total1 - total0)


# --- running the loop and kforge eval from a checkout ---------------------------------------

def child_env(repo: Path, cache: Path, extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(repo), *filter(None, [env.get("PYTHONPATH")])])
    env["KFORGE_CACHE"] = str(cache)
    env.update(extra or {})
    return env


def run_process(argv: list[str], env: dict, cwd: Path, timeout: float):
    """Run argv in a process group of its own; kill the whole group on a timeout."""
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    RUNNING.append(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        err += f"\n(killed after {timeout:.0f} s)"
    finally:
        if proc in RUNNING:
            RUNNING.remove(proc)
    return proc.returncode, out, err


def wait_quiet(most: float, waited_s: float) -> float:
    """Wait (up to `waited_s` seconds) for a second in which others use at most `most` of the
    cores; the share seen last."""
    deadline = time.monotonic() + waited_s
    while True:
        seen = cpu_busy(1.0)
        if seen <= most or time.monotonic() >= deadline:
            return seen


def judge(repo: Path, problem: Path, passes: int, work: Path, cache: Path, trials: int,
          quiet: tuple[float, float] = (0.3, 0.0)) -> dict:
    others = wait_quiet(*quiet)
    candidate = work / f"truth_p{passes}.py"
    candidate.write_text(kernel(passes, "truth"))
    rc, out, err = run_process(
        [sys.executable, "-m", "kforge_nb.cli", "eval", str(problem), str(candidate),
         "--target", "cpp", "--json", "--no-compile-baseline", "--trials", str(trials),
         "--out", str(work / "truth")], child_env(repo, cache), repo, 600)
    try:
        result = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise SystemExit(f"kforge eval of the {passes}-pass kernel gave no JSON "
                         f"(exit {rc}):\n{err[-3000:]}")
    t = result.get("timing") or {}
    if result["state"] != "correct":
        raise SystemExit(f"the {passes}-pass kernel was judged {result['state']}: "
                         f"{result.get('message')}")
    return {"passes": passes, "candidate_ms": t["candidate_ms"], "eager_ms": t["eager_ms"],
            "speedup": t["speedup_vs_eager"], "ci": t["speedup_vs_eager_ci"],
            "busy": t.get("busy"), "seconds": result.get("elapsed_s"),
            "others_cpu": round(others, 3)}


def measure_truth(repo, problem, work, cache, evals: int, trials: int,
                  quiet: tuple[float, float]) -> dict:
    judged = []
    for i in range(evals):
        for k in (1, 2, 3):
            judged.append(judge(repo, problem, k, work, cache, trials, quiet))
            j = judged[-1]
            print(f"truth {i + 1}/{evals}: {k} pass(es) {j['candidate_ms']:.4f} ms, eager "
                  f"{j['eager_ms']:.4f} ms, {j['speedup']:.3f}x "
                  f"[{j['ci'][0]:.3f}, {j['ci'][1]:.3f}]{' busy' if j['busy'] else ''} (others' "
                  f"CPU before: {j['others_cpu']:.0%})",
                  file=sys.stderr, flush=True)
    return truth_of(judged)


def truth_of(judged: list[dict]) -> dict:
    """Medians over the judgings of each kernel; over those the evaluator did not call busy,
    where each kernel has at least two of them (others' work on this machine goes on)."""
    quiet = [j for j in judged if not j["busy"]]
    used = quiet if all(sum(j["passes"] == k for j in quiet) >= 2 for k in (1, 2, 3)) \
        else judged

    def med(k, key):
        return statistics.median(j[key] for j in used if j["passes"] == k)
    ms = {k: med(k, "candidate_ms") for k in (1, 2, 3)}
    speedup = {k: med(k, "speedup") for k in (1, 2, 3)}
    return {"judged": judged, "used": len(used), "busy": len(judged) - len(quiet), "ms": ms,
            "speedup": speedup,
            "eager_ms": statistics.median(j["eager_ms"] for j in used),
            # the head-to-head ratio of a candidate of passes b against a rival of passes a,
            # from the speedups (each a ratio within one judging's rounds, so a judging slowed
            # by others' work moves it far less than it moves that judging's times)
            "ratio": {f"{a}/{b}": speedup[b] / speedup[a] for a in (1, 2, 3) for b in (1, 2, 3)}}


def one_run(repo, problem, pattern, index, seed, work, cache, args) -> dict:
    tag = f"{pattern}{index}"
    kernels = [kernel(k, f"{tag}c{i}") for i, k in enumerate(PASSES)]
    background = cpu_busy(1.0)               # others' load, nothing of ours running
    out = work / "runs" / tag
    with FakeAnthropic([]) as server:
        server.script = script = Script(server, kernels)
        env = child_env(repo, cache, {"ANTHROPIC_API_KEY": "sk-fake-not-a-key",
                                      "ANTHROPIC_BASE_URL": server.url})
        procs = start_load(pattern, seed + index, work)
        RUNNING.extend(procs)
        try:
            time.sleep(0.5 if procs else 0)
            start = time.monotonic()
            rc, stdout, stderr = run_process(
                [sys.executable, "-m", "kforge_nb.cli", "run", str(problem), "--target", "cpp",
                 "--provider", "anthropic", "--iterations", str(len(PASSES)),
                 "--patience", "1000", "--trials", str(args.trials), "--no-compile-baseline",
                 "--out", str(out), "--json", *args.extra], env, repo, args.run_timeout)
            seconds = time.monotonic() - start
        finally:
            stop(procs)
            RUNNING[:] = [p for p in RUNNING if p not in procs]
    run = {"pattern": pattern, "index": index, "rc": rc, "seconds": round(seconds, 1),
           "background_cpu": round(background, 3), "asked": dict(script.asked)}
    try:
        summary = json.loads(stdout.strip().splitlines()[-1])
        folder = Path(summary["artifacts"])
    except (ValueError, IndexError, KeyError):
        folders = sorted(out.glob("*/run.json"))
        summary, folder = {}, folders[-1].parent if folders else None
    if folder is None:
        run["error"] = f"no run folder (exit {rc}): {stderr[-2000:]}"
        return run
    run.update(read_run(folder))
    run["summary"] = {k: summary.get(k) for k in ("reason", "best_iteration", "error",
                                                  "speedup_vs_eager", "speedup_vs_eager_ci")}
    if rc != 0 and not run.get("candidates"):
        run["error"] = f"exit {rc}: {stderr[-2000:]}"
    return run


def read_run(folder: Path) -> dict:
    """The candidates, in the order judged, from events.jsonl; the best at the end."""
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()
              if line.strip()]
    candidates, best_passes, replaced = [], None, 0
    passes_by_id = {}
    for e in events:
        if e["kind"] == "duel":          # a deciding duel may move the best (Loop.settle)
            k = passes_by_id.get(e["data"].get("best"))
            if best_passes is not None and k is not None and k > best_passes:
                replaced += 1
            best_passes = k if k is not None else best_passes
            continue
        if e["kind"] != "evaluated":
            continue
        d, result = e["data"], e["data"].get("result") or {}
        t = result.get("timing") or {}
        cid = f"{e['iteration']}.{d.get('sample', 0)}"
        k = passes_of(d.get("code"))
        passes_by_id[cid] = k
        if d.get("best"):
            if best_passes is not None and k is not None and k > best_passes:
                replaced += 1
            best_passes = k
        candidates.append({
            "id": cid, "passes": k, "state": result.get("state"), "best": bool(d.get("best")),
            "same_as": d.get("same_as"), "tie_with": d.get("tie_with"),
            "candidate_ms": t.get("candidate_ms"), "eager_ms": t.get("eager_ms"),
            "speedup": t.get("speedup_vs_eager"), "ci": t.get("speedup_vs_eager_ci"),
            "busy": t.get("busy"), "noisy": t.get("noisy"), "rounds": t.get("rounds"),
            "versus": t.get("versus")})
    finished = next((e for e in reversed(events) if e["kind"] == "finished"), None)
    best = (finished or {}).get("data", {}).get("best") or None
    kept = passes_of(best.get("code")) if best else None
    return {"folder": str(folder), "candidates": candidates, "kept_passes": kept,
            "kept_id": f"{best['iteration']}.{best['sample']}" if best else None,
            "replaced_by_slower": replaced,
            "reason": (finished or {}).get("data", {}).get("reason")}


# --- the table --------------------------------------------------------------------------------

def holds(ci, value) -> bool:
    return ci is not None and ci[0] <= value <= ci[1]


def row(pattern: str, runs: list[dict], truth: dict) -> dict:
    ok = [r for r in runs if "candidates" in r]
    passes_by_id = {}
    eager_in = eager_n = h2h_in = h2h_n = refused = judged = 0
    for r in ok:
        passes_by_id = {c["id"]: c["passes"] for c in r["candidates"]}
        for c in r["candidates"]:
            if c["same_as"]:
                continue
            judged += 1
            if c["state"] != "correct":
                refused += 1
                continue
            if c["ci"] and c["passes"]:
                eager_n += 1
                eager_in += holds(c["ci"], truth["speedup"][c["passes"]])
            v = c.get("versus")
            rival = passes_by_id.get(v.get("id")) if v else None
            if v and v.get("ci") and rival and c["passes"]:
                h2h_n += 1
                h2h_in += holds(v["ci"], truth["ratio"][f"{rival}/{c['passes']}"])
    return {"pattern": pattern, "runs": len(runs), "failed": len(runs) - len(ok),
            "fastest": sum(r["kept_passes"] == 1 for r in ok), "ok": len(ok),
            "kept": ",".join(str(r["kept_passes"]) for r in ok),
            "replaced": sum(r["replaced_by_slower"] for r in ok),
            "eager_cov": (eager_in, eager_n), "h2h_cov": (h2h_in, h2h_n),
            "refused": refused, "judged": judged,
            "seconds": statistics.mean(r["seconds"] for r in runs) if runs else 0.0,
            "background": statistics.mean(r["background_cpu"] for r in runs) if runs else 0.0}


def pct(pair) -> str:
    hit, n = pair
    return f"{hit / n:4.0%} ({hit}/{n})" if n else "-"


def print_table(rows: list[dict], truth: dict, repo: Path, size: int) -> None:
    sp, ms = truth["speedup"], truth["ms"]
    print(f"\nloop from {repo}; y = 2x over {size} floats; candidates' passes in order "
          f"{'-'.join(map(str, PASSES))}; {os.cpu_count()} cores")
    print(f"idle truth (medians of {truth['used']} of {len(truth['judged'])} kforge eval, "
          f"{truth['busy']} of them said busy): eager {truth['eager_ms']:.4f} ms; "
          + "; ".join(f"{k} pass{'es' if k > 1 else ''} {ms[k]:.4f} ms = {sp[k]:.3f}x"
                      for k in (1, 2, 3)))
    header = ("pattern  | runs | kept best = fastest | kept (passes) | slower replaced "
              "faster | holds truth: vs eager | head-to-head | refused | mean run s | others' "
              "CPU")
    print(header)
    for r in rows:
        fastest = f"{r['fastest'] / r['ok']:4.0%} ({r['fastest']}/{r['ok']})" if r["ok"] else "-"
        failed = f" ({r['failed']} failed)" if r["failed"] else ""
        print(f"{r['pattern']:8} | {r['runs']:4} | {fastest:19} | {r['kept']:13} | "
              f"{r['replaced']:22} | {pct(r['eager_cov']):20} | {pct(r['h2h_cov']):12} | "
              f"{r['refused']}/{r['judged']:<5} | {r['seconds']:10.1f} | "
              f"{r['background']:6.0%}{failed}")
    print("kept best = fastest: the run's best at the end is the 1-pass kernel; slower replaced "
          "faster: times an `evaluated` event named a best with more passes than the best "
          "before it; holds truth: the displayed 95 % intervals that hold the idle truth "
          "(speedup vs eager; the rival's time / the candidate's); refused: correct kernels "
          "judged other than correct, of those judged; others' CPU: the share of both cores "
          "busy in the second before each run, before our load started")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--patterns", default=",".join(PATTERNS),
                        help=f"comma-separated, of {','.join(PATTERNS)}")
    parser.add_argument("--runs", type=int, default=3, help="runs of the loop per pattern")
    parser.add_argument("--seed", type=int, default=0, help="the bursty neighbour's schedule")
    parser.add_argument("--repo", default=str(HERE.parent),
                        help="the checkout whose kforge_nb runs the loop (default: this one)")
    parser.add_argument("--size", type=int, default=1 << 20, help="floats in y = 2x")
    parser.add_argument("--truth-evals", type=int, default=4,
                        help="idle `kforge eval` judgings of each kernel for the truth")
    parser.add_argument("--quiet", type=float, default=0.3,
                        help="before each truth judging, wait for a second in which others "
                             "use at most this share of the cores ...")
    parser.add_argument("--quiet-wait", type=float, default=60,
                        help="... for at most this many seconds (then judge anyway)")
    parser.add_argument("--truth", help="take the idle truth from this earlier --json file")
    parser.add_argument("--rescore", help="print the table of this earlier --json file, "
                        "running nothing")
    parser.add_argument("--trials", type=int, default=2, help="correctness trials a candidate")
    parser.add_argument("--run-timeout", type=float, default=900, help="seconds a run may take")
    parser.add_argument("--json", help="write the truth and every run's data here")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("extra", nargs="*", help="after --: more `kforge run` options")
    args = parser.parse_args()
    patterns = [p for p in args.patterns.split(",") if p]
    for p in patterns:
        if p not in PATTERNS:
            parser.error(f"unknown pattern {p!r}: one of {', '.join(PATTERNS)}")
    if args.rescore:
        data = json.loads(Path(args.rescore).read_text())
        truth = truth_of(json.loads(Path(args.truth or args.rescore).read_text())
                         ["truth"]["judged"])
        print_table([row(p, data["runs"][p], truth) for p in data["runs"]], truth,
                    Path(data["repo"]), data["size"])
        return
    repo = Path(args.repo).resolve()
    if not (repo / "kforge_nb" / "cli.py").is_file():
        parser.error(f"{repo} holds no kforge_nb/cli.py")
    signal.signal(signal.SIGTERM, on_signal)
    work = Path(tempfile.mkdtemp(prefix="kforge-loop-load-"))
    cache = work / "cache"                     # compiled kernels; each run's texts are its own
    problem = work / "twice.py"
    problem.write_text(PROBLEM.replace("{size}", str(args.size)))
    began = time.monotonic()
    print(f"work folder {work}{' (kept)' if args.keep else ' (removed at the end)'}",
          file=sys.stderr, flush=True)
    try:
        if args.truth:
            saved = json.loads(Path(args.truth).read_text())["truth"]
            truth = truth_of(saved["judged"])
        else:
            truth = measure_truth(repo, problem, work, cache, args.truth_evals, args.trials,
                                  (args.quiet, args.quiet_wait))
        runs: dict[str, list[dict]] = {}
        for pattern in patterns:
            runs[pattern] = []
            for i in range(args.runs):
                r = one_run(repo, problem, pattern, i, args.seed, work, cache, args)
                runs[pattern].append(r)
                said = ", ".join(
                    f"{c['passes']}p {c['state']} {c['speedup'] or 0:.3f}x" +
                    (" BEST" if c["best"] else "") for c in r.get("candidates", []))
                print(f"{pattern} {i + 1}/{args.runs}: kept {r.get('kept_passes')} pass(es), "
                      f"{r['seconds']:.0f} s, others' CPU {r['background_cpu']:.0%}: {said}"
                      f"{' ERROR ' + r['error'] if r.get('error') else ''}",
                      file=sys.stderr, flush=True)
        rows = [row(p, runs[p], truth) for p in patterns]
    finally:
        stop_all()
        if not args.keep:
            subprocess.run(["rm", "-rf", str(work)])
    if args.json:
        Path(args.json).write_text(json.dumps({
            "repo": str(repo), "size": args.size, "passes": PASSES, "seed": args.seed,
            "truth": truth, "runs": runs, "rows": rows}, indent=1, default=str))
    print_table(rows, truth, repo, args.size)
    print(f"total {time.monotonic() - began:.0f} s")


if __name__ == "__main__":
    main()
