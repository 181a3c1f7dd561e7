"""`kforge`: the command line, a thin shell over the library.

    kforge eval REF CAND [--target T] [--json] ...   judge one candidate (exit 0 iff correct)
    kforge run PROBLEM [--provider P] [--iterations N] ... the agent loop (exit 0 iff correct)
    kforge run --resume RUN_DIR [--iterations N] ...   go on with an interrupted or ended run
    kforge runs [DIR]                                  the runs under DIR: state, best so far
    kforge bench DIR_OR_FILES [--candidates DIR] [--workers N | --cluster ADDR] ...
                                                       a suite: one table, fast_p, resumable
    kforge worker tcp://HOST:PORT                      offer this machine to a Dask cluster
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import __version__
from .options import (BENCH_SUMMARY, DEFAULT_PRECISION, EVAL, MODEL, RUN, add_bench_arguments,
                      add_options)

EXIT_CORRECT, EXIT_VERDICT, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kforge", description="Interactive kernel "
                                     "engineering: generate, judge and profile kernels for "
                                     "PyTorch modules.")
    parser.add_argument("--version", action="version", version=f"kforge-nb {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("eval", help="judge one candidate against a reference")
    p.add_argument("reference", help="reference .py in KernelBench form (Model, get_inputs, "
                   "get_init_inputs)")
    p.add_argument("candidate", help="candidate .py defining ModelNew")
    add_options(p, EVAL)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("run", help="generate, judge and improve kernels for a reference")
    p.add_argument("reference", nargs="?", help="reference .py in KernelBench form (none with "
                   "--resume)")
    add_options(p, RUN)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("runs", help="list the runs under a folder: running, interrupted or "
                       "finished, and the best so far")
    p.add_argument("folder", nargs="?", default="kforge-runs", help="default kforge-runs")
    p.add_argument("--json", action="store_true", help="print the runs as JSON")
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("bench", help=BENCH_SUMMARY)
    add_bench_arguments(p)
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("model", help="a whole model: split it into parts, optimise each part, "
                       "recompose one ModelNew file and judge it end to end")
    p.add_argument("reference", help="the model's .py in KernelBench form (Model, get_inputs, "
                   "get_init_inputs)")
    add_options(p, MODEL)
    p.set_defaults(func=cmd_model)

    p = sub.add_parser("worker", help="offer this machine to a Dask cluster: a worker per GPU "
                       "(GPU=1), or MPS=1 on a Mac, or one CPU worker")
    p.add_argument("address", help="the scheduler, tcp://HOST:PORT")
    p.add_argument("--name", help="worker name prefix (default: this host's name)")
    p.set_defaults(func=cmd_worker)
    return parser


# A kept torch op is refused by name in forward before the candidate runs, or by the audit
# once it runs: either way the file's own allowances (`--as-judged`) are what the run used
TORCH_COMPUTE_RULES = {"torch-compute-in-forward", "torch-compute-at-runtime"}


def cmd_eval(args) -> int:
    from .evaluator import evaluate
    from .evaluator.parent.verdicts import quoted
    from .problem import Problem
    from .session.config import eval_options
    from .targets import get_target
    candidate_path = Path(args.candidate)
    if not candidate_path.is_file():
        return usage_error(f"candidate file {args.candidate!r} does not exist")
    if args.as_judged:
        why = take_declared_flags(args, candidate_path)
        if why:
            return usage_error(why)
    problem = Problem.from_file(args.reference)
    target = get_target(args.target)
    if not args.json:
        print(f"kforge eval: {candidate_path.name} vs {problem.label} on {target.name} "
              f"({target.device()})", file=sys.stderr)
    # bytes: a file that is not UTF-8 text is the candidate's compile_failure, kept as it was
    said = None if args.json else (lambda line: print(f"  {line}", file=sys.stderr, flush=True))
    result = evaluate(problem, candidate_path.read_bytes(), target, eval_options(args),
                      progress=said)
    if args.json:
        print(json.dumps(result.to_dict(), default=str))
    else:
        print(result.summary())
        if result.error and result.error.get("log"):     # the compiler's, quoted as such
            print("\ncompiler output (end):\n" + quoted(result.error["log"], 3000, end=True))
        print(f"artifacts: {result.artifacts}")
        if TORCH_COMPUTE_RULES & set(result.rules) and not args.as_judged:
            print(declared_hint(candidate_path))
    return EXIT_CORRECT if result.ok else EXIT_VERDICT


def take_declared_flags(args, path: Path) -> str:
    """Apply the candidate file's `# kforge-judged-with:` flags to `args` (the ops allowed
    added to --allow; --target and --precision where not given), said on stderr; the reason
    it cannot, else ""."""
    from .export import DeclarationError, declared_flags
    try:
        words = declared_flags(path.read_text(errors="replace"))
    except DeclarationError as err:
        return f"--as-judged: {path.name}: {err}"
    if words is None:
        return (f"--as-judged: {path.name} has no '# kforge-judged-with:' line (kforge writes "
                "one as the first line of a run's best_candidate.py)")
    for flag, value in zip(words[::2], words[1::2]):
        if flag == "--allow":
            args.allow = [*(args.allow or []), value]
        elif flag == "--target" and args.target in (None, "auto"):
            args.target = value
        elif flag == "--precision" and args.precision in (None, DEFAULT_PRECISION):
            args.precision = value
    print(f"kforge eval: judging as the run did ({path.name}'s kforge-judged-with line): "
          f"{' '.join(words)}", file=sys.stderr)
    return ""


def declared_hint(path: Path) -> str:
    """After a torch-compute refusal: the flags the run used, where the file says them."""
    from .export import DeclarationError, declared_flags
    try:
        words = declared_flags(path.read_text(errors="replace"))
    except DeclarationError:
        return ""
    if not words or "--allow" not in words:
        return ""
    return (f"the run that exported {path.name} judged it with {' '.join(words)}: "
            f"kforge eval --as-judged judges it the same way")


def cmd_run(args) -> int:
    from .problem import Problem
    from .session import finish
    from .session.config import resume_from_args, session_from_args
    from .ui.terminal import Progress, TerminalPolicy
    policy = TerminalPolicy() if args.review else None
    if args.resume:
        if args.reference:
            return usage_error("--resume continues a saved run with its own reference; give "
                               "either a reference or --resume RUN_DIR, not both")
        session = resume_from_args(args, policy)
    elif not args.reference:
        return usage_error("kforge run needs a reference file (or --resume RUN_DIR)")
    else:
        session = session_from_args(Problem.from_file(args.reference), args, policy)
    session.subscribe(Progress(), replay=False)    # a resumed run says where it picks up
    try:
        session.run()
    except KeyboardInterrupt:                      # saved as interrupted by the session
        return usage_error(f"interrupted; the run is saved: go on with kforge run --resume "
                           f"{session.folder}")
    summary = session.summary()
    if args.json:
        print(json.dumps(summary, default=str))
    elif session.history:                          # no table of no candidates
        print(history_table(session))
        if session.best:
            print(f"best kernel: {summary['artifacts']}/best_candidate.py")
    if session.error:
        print(f"kforge: {session.error}", file=sys.stderr)
        bad_setup = session.finish is not None and session.finish.kind in (
            finish.PROVIDER_ERROR, finish.BAD_INPUT)
        return EXIT_USAGE if bad_setup else EXIT_VERDICT
    return EXIT_CORRECT if session.best else EXIT_VERDICT


def cmd_bench(args) -> int:
    from .bench.config import bench_from_args
    from .bench.report import table
    from .bench.store import BenchBusy, SettingsDiffer
    from .executors import ExecutorError
    from .ui.bench_views import TerminalBar
    try:
        bench = bench_from_args(args)
    except (SettingsDiffer, ValueError, ExecutorError) as err:
        return usage_error(str(err))
    try:
        with bench.executor:
            rows = bench.run(TerminalBar())
    except KeyboardInterrupt:
        return usage_error(f"interrupted; {len(bench.store.rows)} finished problems are saved "
                           f"in {bench.store.folder}: run the same command to go on")
    except (ExecutorError, BenchBusy) as err:
        return usage_error(str(err))
    if args.json:
        print(json.dumps({"folder": str(bench.store.folder), **bench.report()}, default=str))
    else:
        print(table(rows))
        print(f"results: {bench.store.folder}/results.csv and results.json")
    return EXIT_CORRECT if all(r.correct for r in rows) else EXIT_VERDICT


def cmd_model(args) -> int:
    from .model import ModelError
    from .problem import Problem
    from .session.config import model_session_from_args
    from .ui.model_view import TerminalModelProgress, summary_text
    session = model_session_from_args(Problem.from_file(args.reference), args)
    session.subscribe(TerminalModelProgress())
    if args.list_parts:
        try:
            found = session.decompose()
        except ModelError as err:
            return usage_error(str(err))
        if args.json:
            print(json.dumps(found, default=str))
        else:
            for part in found["parts"]:
                print(f"part {part['id']}: {part['file']}")
            biggest = sorted(found["parts"], key=lambda p: -p["share"])[:2]
            print(f"optimise some with: kforge model {args.reference} --parts "
                  f"{','.join(str(p['id']) for p in biggest)}")
        return EXIT_CORRECT
    try:
        summary = session.run()
    except KeyboardInterrupt:
        session.stop()
        return usage_error(f"interrupted; the finished parts' runs are in {session.folder}")
    if args.json:
        e2e = {k: v for k, v in summary["end_to_end"].items() if k != "result"}
        print(json.dumps({**summary, "end_to_end": e2e}, default=str))
    else:
        print(summary_text(summary))
    if summary["error"]:
        print(f"kforge: {summary['error']}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_CORRECT if summary["end_to_end"].get("state") == "correct" else EXIT_VERDICT


def cmd_worker(args) -> int:
    """Offer this machine to a Dask cluster until Ctrl-C (see executors/cluster.py)."""
    import subprocess
    import torch
    from .executors.cluster import worker_commands
    from .executors.local import visible_gpus
    commands = worker_commands(args.address, visible_gpus(),
                               torch.backends.mps.is_available(), args.name)
    procs = [subprocess.Popen(argv, env=env) for argv, env in commands]
    print(f"kforge worker: {len(procs)} Dask worker(s) for {args.address}: "
          + ", ".join(argv[argv.index("--name") + 1] for argv, _ in commands), file=sys.stderr)
    try:
        return max(p.wait() for p in procs)
    except KeyboardInterrupt:
        for p in procs:
            p.terminate()
        return EXIT_CORRECT


def cmd_runs(args) -> int:
    from .session import saved
    folder = Path(args.folder)
    if not folder.is_dir():
        return usage_error(f"{args.folder!r} is not a folder")
    runs = saved.list_runs(folder)
    if args.json:
        print(json.dumps([{"folder": str(r[0]), "status": "damaged", "error": r[1]}
                          if isinstance(r, tuple) else
                          {"folder": str(r.folder), "status": r.status,
                           "iterations_done": r.iterations_done,
                           "iterations_budget": r.iterations_budget, **r.summary}
                          for r in runs], default=str))
    elif not runs:
        print(f"no runs under {folder} (a run folder holds run.json)")
    else:
        print(saved.runs_table(runs))
        if any(not isinstance(r, tuple) and r.status == "interrupted" for r in runs):
            print(f"\ngo on with one: kforge run --resume {folder}/RUN")
    return EXIT_CORRECT


def history_table(session) -> str:
    """One row per candidate: its time (its own, the load mostly left out, on a busy CPU), its
    head-to-head with the best of its time (what decided whether it was kept), speedups as
    `1.42x ±6%` (95 % interval; written out on a busy CPU), and whether it repeats an earlier
    candidate's code, tied with the best, or was timed on a busy machine."""
    from .intervals import busy_text, own_ms, shown_speedup, versus_tag
    from .baselines import common_mode, short_name
    compiled = short_name(common_mode(a.result.timing for a in session.history))
    rows = [("iter", "sample", "from", "kind", "state", "ms", "side by side", "vs eager",
             f"vs {compiled}", "note")]
    ties = session.ties
    busy = []
    for a in session.history:
        t = a.result.timing
        note = [f"same as {a.same_as}"] if a.same_as else \
            [f"tie with {ties[a.id]}"] if a.id in ties else []
        if t.busy and not a.same_as:
            note.append("busy")
            busy.append(a)
        if a is session.best:
            note.insert(0, "★ best")
        ms = own_ms(t)
        rows.append((str(a.iteration), str(a.sample), a.parent or "-", a.kind, a.result.state,
                     f"{ms:.4g}" if ms else "-",
                     versus_tag(t.versus) if not a.same_as else "",
                     shown_speedup(t, compact=True) if t.speedup_vs_eager else "-",
                     shown_speedup(t, "compile", mark_noise=False, compact=True)
                     if t.speedup_vs_compile else "-", ", ".join(note)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    if busy:        # what the note column's "busy" means, said once, right under the rows
        lines.append("⚠ " + busy_text(busy[-1].result.timing.busy_note, [a.id for a in busy]))
    if session.best:
        lines.append(f"★ best: candidate {session.best.id}")
    if any(a.result.timing.versus for a in session.history):
        lines.append("side by side: each candidate timed beside the best of its time in the same "
                     "rounds; only faster side by side (interval above 1x, beyond what a kernel "
                     "shows against itself) replaces the best; a tie leaves the earlier")
    if any(a.result.timing.speedup_vs_eager_ci for a in session.history):
        lines.append("speedups: median of paired ratios ± half its 95 % interval (busy: the "
                     "interval written out); shown, never compared across judgings")
    s = session.summary()
    lines.append(f"tokens: {s['input_tokens']} in, {s['output_tokens']} out; estimated cost "
                 f"${s['cost_usd']:.4f}" + (f" (+{s['unpriced_calls']} calls to unpriced models)"
                                            if s["unpriced_calls"] else ""))
    return "\n".join(lines)


def usage_error(message: str) -> int:
    print(f"kforge: {message}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    from .problem import ProblemError
    from .providers import ProviderError
    from .session.saved import ResumeError
    from .targets import UnknownTarget
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ProblemError, UnknownTarget, ProviderError, FileNotFoundError, ResumeError) as err:
        return usage_error(str(err))
    except KeyboardInterrupt:
        return usage_error("interrupted")


if __name__ == "__main__":
    sys.exit(main())
