"""The evaluation protocol, top to bottom: (problem, candidate, target) -> Result.

 1. Static checks in this process: the candidate parses; guardrails (target requirements,
    default bans, the user's rules). No candidate code runs here, ever.
 2. Availability: a target that cannot run on this host gives `unavailable` (after compiling
    the candidate where the compiler is present, so compile errors are still reported).
 3. Reference worker (cached per problem and device): trial inputs from fresh seeds, other value
    distributions and another batch size; reference outputs and weights; eager and
    torch.compile timings; FLOPs and minimum bytes.
 4. Candidate worker: builds the candidate with the reference's weights, runs every trial,
    writes its outputs and the inputs as it left them. Crashes, timeouts and memory blow-ups
    end that child only.
 5. Verdict, in this process: inputs untouched, shapes/dtypes equal, values within the
    policy's tolerances and the relative-norm guard, on every trial.
 6. Timing and profile (correct candidates only), re-timed when the speedup looks too good;
    roofline; anything the candidate patched is named and the verdict is `rejected`.
 7. Artifacts: candidate, result.json, logs and traces in one folder.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import artifacts, devices
from ..problem import Problem, ProblemError
from ..result import (COMPILE_FAILURE, CORRECT, MISMATCH, REJECTED, RUNTIME_ERROR, UNAVAILABLE,
                      Result, Timing)
from ..runtime.native import cache_dir
from ..targets import Target, get_target
from . import correctness
from ..guardrails import Guardrails
from .process import Worker, WorkerFailure, default_memory_limit

SUSPICIOUS_SPEEDUP = 10.0
# One evaluation at a time may time or profile on a device: concurrent timing lies.
DEVICE_LOCK = threading.Lock()


@dataclass
class EvalOptions:
    trials: int = 5
    timeout_s: float = 180.0
    memory_bytes: int = field(default_factory=default_memory_limit)
    precision: str = "strict"
    guardrails: Guardrails = field(default_factory=Guardrails)
    baselines: tuple[str, ...] = ("eager", "compile")
    measure: bool = True            # time and profile correct candidates
    shape_check: bool = True        # one extra trial at another batch size
    seed: int = 0
    out_dir: str | Path = "kforge-runs"
    timing_budget_s: float = 1.0

    def trial_plan(self) -> list[dict]:
        distributions = ["given", "given", "scaled", "uniform"]
        plan = [{"seed": self.seed + i, "distribution": distributions[i % 4] if i < 4 else "given"}
                for i in range(max(1, self.trials))]
        if self.shape_check:
            plan.append({"seed": self.seed + len(plan), "distribution": "given", "batch": "auto"})
        return plan


def evaluate(problem: Problem, candidate: str, target: str | Target = "auto",
             options: EvalOptions | None = None, folder: str | Path | None = None) -> Result:
    """Judge one candidate. See the module docstring for the protocol."""
    options = options or EvalOptions()
    target = get_target(target) if isinstance(target, str) else target
    folder = Path(folder) if folder else artifacts.new_folder(
        options.out_dir, f"{problem.name}-{target.name}")
    started = time.monotonic()
    artifacts.write_text(folder / "candidate.py", candidate)
    artifacts.write_text(folder / "reference.py", problem.source)
    result = judge(problem, candidate, target, options, folder)
    result.target, result.artifacts = target.name, str(folder)
    result.elapsed_s = round(time.monotonic() - started, 3)
    artifacts.write_json(folder / "result.json", result.to_dict())
    return result


def judge(problem: Problem, candidate: str, target: Target, options: EvalOptions,
          folder: Path) -> Result:
    # 1. static checks
    try:
        tree = ast.parse(candidate, filename=str(folder / "candidate.py"))
    except SyntaxError as err:
        return Result(COMPILE_FAILURE, f"candidate.py line {err.lineno}: {err.msg}",
                      error={"type": "SyntaxError", "text": err.msg, "line": err.lineno,
                             "source_line": (err.text or "").rstrip()})
    fired = options.guardrails.check(candidate, tree, target.required, problem.source)
    if fired:
        lines = [f"{rule.name}: {rule.reason} ({'; '.join(where[:3])})" for rule, where in fired]
        return Result(REJECTED, "guardrail fired: " + " | ".join(lines),
                      rules=[rule.name for rule, _ in fired])

    # 2. availability
    available = target.availability()
    if not available.runs:
        if available.compiles:
            failed = run_candidate(problem, candidate, target, options, folder, None)
            if failed is not None:
                return failed
        return Result(UNAVAILABLE, available.reason)

    # 3. reference (cached)
    reference = run_reference(problem, target.device(), options)

    # 4 + 5 + 6. candidate, verdict, measurements
    return run_candidate(problem, candidate, target, options, folder, reference)


def run_reference(problem: Problem, device: str, options: EvalOptions) -> dict:
    """Reference data and baselines for this problem on this device, cached on disk."""
    import torch
    plan = options.trial_plan()
    # Problems may read KFORGE_* variables (e.g. KFORGE_SIZE picks cpu or gpu shapes).
    knobs = sorted((k, v) for k, v in os.environ.items() if k.startswith("KFORGE_")
                   and k != "KFORGE_CACHE")
    key = hashlib.sha256(json.dumps([problem.source, plan, device, torch.__version__, knobs,
                                     devices.gpu_name() if device == "cuda" else "",
                                     sorted(options.baselines)]).encode()).hexdigest()[:20]
    folder = cache_dir() / "reference" / key
    summary_path = folder / "reference.json"
    if not summary_path.exists():
        with DEVICE_LOCK:
            # Candidates of one problem judged at once wait here: the first computes it.
            if not summary_path.exists():
                compute_reference(problem, device, plan, options, folder)
    return {**json.loads(summary_path.read_text()), "folder": str(folder)}


def compute_reference(problem: Problem, device: str, plan: list[dict], options: EvalOptions,
                      folder: Path) -> None:
    """Run the reference worker; its data lands in `folder` whole or not at all."""
    tmp = folder.with_name(folder.name + f".tmp{threading.get_ident()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    job = {"source": problem.source, "label": problem.label, "device": device, "trials": plan,
           "init_seed": options.seed, "baselines": list(options.baselines),
           "data": str(tmp / "reference.pt"), "trace": str(tmp / "reference_trace.json"),
           "log": str(tmp / "reference.log")}
    worker = Worker("reference_main", job, max(options.timeout_s, 600.0), options.memory_bytes)
    try:
        message = worker.recv()
    except WorkerFailure as failure:
        log = log_tail(job["log"])
        shutil.rmtree(tmp, ignore_errors=True)
        raise ProblemError(f"{problem.label}: the reference itself failed: {failure}. "
                           f"End of its log:\n{log}") from None
    finally:
        worker.close()
    if "problem_error" in message:
        shutil.rmtree(tmp, ignore_errors=True)   # the message says it all; leave no half entry
        err = message["problem_error"]
        where = f" line {err['line']} ({err['source_line']})" if err.get("line") else ""
        raise ProblemError(f"{problem.label}{where}: running the reference raised "
                           f"{err['type']}: {err['text']}. Check Model, get_inputs() and "
                           f"get_init_inputs().")
    artifacts.write_json(tmp / "reference.json", message["done"])
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)


def log_tail(path: str, chars: int = 1500) -> str:
    try:
        return Path(path).read_text(errors="replace")[-chars:].strip() or "(empty)"
    except OSError:
        return "(no log)"


def run_candidate(problem: Problem, candidate: str, target: Target, options: EvalOptions,
                  folder: Path, reference: dict | None) -> Result | None:
    """Steps 4-6. With `reference=None` only builds the candidate (compile-only hosts)."""
    device = target.device() if reference else "cpu"
    job = {"source": candidate, "filename": str(folder / "candidate.py"), "target": target.name,
           "device": device, "compile_only": reference is None, "init_seed": options.seed,
           "precision": options.precision,
           "env": target.worker_env(), "log": str(folder / "worker.log"),
           "data": str(Path(reference["folder"]) / "reference.pt") if reference else "",
           "outputs": str(folder / "candidate_outputs.pt"), "trace": str(folder / "trace.json"),
           "timing": {"budget_s": options.timing_budget_s} if not target.timing_note()
           else {"min_repeats": 3, "max_repeats": 3, "budget_s": 0.0}}  # not a timing anyway
    worker = Worker("candidate_main", job, options.timeout_s, options.memory_bytes)
    try:
        message = worker.recv()
        if "failed" in message:
            return failure_result(message, target)
        if reference is None:
            return None
        result = verdict(message, reference, options)
        if result.state != CORRECT or not options.measure:
            return result
        with DEVICE_LOCK:
            worker.extend(options.timeout_s)
            measure(worker, result, reference, target, options, folder)
        return result
    except WorkerFailure as failure:
        return Result(RUNTIME_ERROR, f"{failure} (see worker.log)",
                      error={"type": failure.kind, "text": str(failure)})
    finally:
        worker.close()


def failure_result(message: dict, target: Target) -> Result:
    failed = message["failed"]
    tampered = message.get("tampered") or []
    where = f"line {failed['line']}: " if failed.get("line") else ""
    if failed["state"] == COMPILE_FAILURE:
        text = f"{target.name} build failed, {where}{failed['text'].strip()[:1500]}"
    else:
        text = f"{failed['type']} during {failed['phase']}, {where}{failed['text'][:1500]}"
    result = Result(failed["state"], text, error=failed)
    return tampering(result, tampered) if tampered else result


def verdict(message: dict, reference: dict, options: EvalOptions) -> Result:
    import torch
    ref = torch.load(Path(reference["folder"]) / "reference.pt", weights_only=False)
    cand = torch.load(message["outputs"], weights_only=False)
    ok, text, report = correctness.check_trials(ref["trials"], cand, options.precision)
    if reference.get("skipped"):
        text += "; " + "; ".join(reference["skipped"])
    if options.precision != "strict":
        text += f"; tolerances loosened for the {options.precision} precision policy"
    text += f"; weights {message['weights']}"
    result = Result(CORRECT if ok else MISMATCH, text, correctness=report)
    return tampering(result, message.get("tampered") or [])


def tampering(result: Result, tampered: list[str]) -> Result:
    if not tampered:
        return result
    result.rules.append("tampering")
    result.message = (f"the candidate replaced {', '.join(tampered)} (rule `tampering`); its own "
                      f"outcome was {result.state}: {result.message}")
    result.state = REJECTED
    return result


def measure(worker: Worker, result: Result, reference: dict, target: Target,
            options: EvalOptions, folder: Path) -> None:
    note = target.timing_note()
    worker.send("time")
    timing = worker.recv()
    # Every phase's integrity check counts: a patch may be undone before the next one looks.
    tampered = set(timing.get("tampered") or [])
    median = timing["timing"]["median_ms"]
    eager = (reference.get("eager") or {}).get("median_ms")
    compiled = (reference.get("compile") or {}).get("median_ms")
    rechecked = False
    if not note and eager and eager / median > SUSPICIOUS_SPEEDUP:
        worker.send("time")      # too good to believe once: time it again, keep the slower
        again = worker.recv()
        tampered.update(again.get("tampered") or [])
        if again["timing"]["median_ms"] > median:
            timing = again
            median = timing["timing"]["median_ms"]
        rechecked = True
    t = timing["timing"]
    if t.get("wall_ms") and t["wall_ms"] > 3 * median and t["wall_ms"] - median > 0.05:
        note = (f"device events saw {median:.4g} ms but a wall-clock loop {t['wall_ms']:.4g} ms "
                "per call: work escapes the timed stream; the wall-clock figure is used")
        median = t["wall_ms"]
    result.timing = Timing(
        real=not note or note.startswith("device events"), note=note,
        device=devices.peaks(target.device())[0] if not note else target.device(),
        candidate_ms=median, eager_ms=eager, compile_ms=compiled,
        candidate_spread=t["spread"], repeats=t["repeats"], rechecked=rechecked,
        speedup_vs_eager=eager / median if eager else None,
        speedup_vs_compile=compiled / median if compiled else None)
    if "compile" in reference and "error" in reference["compile"]:
        result.timing.note = (result.timing.note + "; " if result.timing.note else "") + \
            "torch.compile baseline failed: " + reference["compile"]["error"]
    worker.send("profile")
    profiled = worker.recv()
    result.profile = {"candidate_events": profiled["events"],
                      "reference_events": reference.get("events", []),
                      "trace": str(folder / "trace.json"),
                      "reference_trace": str(folder / "reference_trace.json")}
    ref_trace = Path(reference["folder"]) / "reference_trace.json"
    if ref_trace.exists():
        shutil.copyfile(ref_trace, folder / "reference_trace.json")
    dtype = (reference.get("output_dtypes") or ["torch.float32"])[0].replace("torch.", "")
    result.roofline = devices.roofline(reference.get("flops"), reference.get("min_bytes"), dtype,
                                       target.device(), median if result.timing.real else None,
                                       options.precision)
    tampering(result, sorted(tampered.union(profiled.get("tampered") or [])))


__all__ = ["evaluate", "EvalOptions", "Guardrails", "ProblemError"]
