"""The builtin agent's first Triton kernel for every KernelBench problem, judged at its own sizes.

One row per problem: generation (capture at the problem's sizes on the meta device), then the
evaluator's verdict for the first candidate (strict fp32, 2 trials, timed against eager); a
seeded draw of the problems also times torch.compile. No session, no later iterations: this
measures the agent's reach and the first kernel's speed, quickly enough for all 200 level 1 + 2
problems in one device call. Resumable: problems with a row in any *.jsonl beside OUT are
skipped. Problem files are test data (KernelBench's level1/ and level2/), never in this repo.

On a host with G GPUs, two processes per GPU (compiling beside a timing; the evaluator's
device lock keeps timings apart), each taking every K-th problem:

    for k in $(seq 0 $((2*G-1))); do
      CUDA_VISIBLE_DEVICES=$((k % G)) PYTHONPATH=. python3 benchmarks/kernelbench_first_kernel.py \\
          KB_DIR res/part$k.jsonl --part $k --parts $((2*G)) --seconds 470 &
    done; wait

Two processes per 80 GB GPU ran out of memory on 4 of the biggest problems (6.4 GB tensors,
held by both); rerun those with one process per GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kforge_nb.agents.base import GenerationRequest  # noqa: E402
from kforge_nb.agents.builtin.generator import BuiltinGenerator  # noqa: E402
from kforge_nb.evaluator import EvalOptions, evaluate  # noqa: E402
from kforge_nb.guardrails import Guardrails  # noqa: E402
from kforge_nb.problem import Problem  # noqa: E402

TIMED = ("candidate_ms", "eager_ms", "compile_ms", "speedup_vs_eager", "speedup_vs_compile")


def judged(path: Path, held_out: bool) -> dict:
    row = {"problem": path.stem, "held_out": held_out}
    problem = Problem.from_file(path)
    generation = BuiltinGenerator().generate(GenerationRequest(problem, "triton", "initial"))
    row["notes"] = (generation.notes or generation.failure or "")[:300]
    if generation.code is None:
        return {**row, "state": "generation_failure", "message": generation.failure}
    options = EvalOptions(baselines=("eager", "compile") if held_out else ("eager",),
                          out_dir=Path(tempfile.mkdtemp()), timing_budget_s=0.5, trials=2,
                          timeout_s=400, guardrails=Guardrails(allow=generation.kept_ops))
    result = evaluate(problem, generation.code, "triton", options)
    row.update(state=result.state, message=(result.message or "")[:1500])
    if result.timing is not None:
        row.update({k: getattr(result.timing, k, None) for k in TIMED})
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("problems", help="a folder of KernelBench files (e.g. level1_*.py, level2_*.py)")
    ap.add_argument("out", help="rows are appended here (jsonl)")
    ap.add_argument("--seed", type=int, default=20261126)
    ap.add_argument("--draw", type=int, default=40, help="problems that also time torch.compile")
    ap.add_argument("--part", type=int, default=0)
    ap.add_argument("--parts", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=470, help="start no problem after this")
    a = ap.parse_args()
    deadline = time.time() + a.seconds
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    files = sorted(Path(a.problems).glob("*.py"))
    held = {f.stem for f in random.Random(a.seed).sample(files, min(a.draw, len(files)))}
    done = {json.loads(line)["problem"] for p in Path(a.out).parent.glob("*.jsonl")
            for line in open(p) if line.strip()}
    mine = sorted((f for i, f in enumerate(files) if i % a.parts == a.part and f.stem not in done),
                  key=lambda f: f.stem not in held)       # the draw first: it carries compile
    with open(a.out, "a") as out:
        for path in mine:
            if time.time() > deadline:
                return 3
            started = time.time()
            try:
                row = judged(path, path.stem in held)
            except Exception:
                row = {"problem": path.stem, "held_out": path.stem in held, "state": "crash",
                       "message": traceback.format_exc()[-1500:]}
            row["s"] = round(time.time() - started, 1)
            out.write(json.dumps(row, default=str) + "\n")
            out.flush()
            print(row["problem"], row["state"], row.get("speedup_vs_eager"), row["s"], flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
