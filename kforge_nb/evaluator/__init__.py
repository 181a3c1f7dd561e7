"""Judge a model-written kernel against its PyTorch reference: (problem, candidate, target)
-> Result.

Follow one verdict (a correct candidate, timed) in five files:
  parent/protocol.py   evaluate(), then Evaluation.run: the workers started, the trials one by
                       one (the judge's reference against the candidate's output), `correct`
  parent/timing.py     the timed rounds of that correct candidate (TimedRounds.time_and_profile)
  parent/figures.py    the rounds' numbers into result.timing: speedups, intervals, roofline
  worker/judge.py      what the judge does for each command: Judge.prepare, Judge.check, ...
  worker/candidate.py  what the candidate's worker does: Candidate.trial, Candidate.time, ...
A command the parent sends (`talk.ask_candidate("trial", ...)`) is served by the worker's method
of the same name; wire/messages.py lists each with its arguments and its reply's shape.

The package, by role (the protocol itself, top to bottom, is parent/protocol.py's docstring):

parent/   the parent process: decides every verdict
  protocol.py     evaluate() and verdict_of(): static checks, availability, then `Evaluation`,
                  which holds the talk and the timer and decides the verdict
  talk.py         WorkerTalk: both workers, the commands sent, the candidate's replies checked
  timing.py       TimedRounds: the timed rounds (calibrated, interleaved, checked again),
                  profiles, ncu
  figures.py      a timing's numbers into the verdict: medians, intervals, policy, roofline
  options.py      EvalOptions: what a judging is asked to do; the trials' and timed calls' seeds
  jobs.py         the jobs both workers start with (the candidate's carries its sandbox plan)
  replies.py      the shape every reply of the candidate's worker must have
  rival.py        the best so far, timed beside the candidate (the head-to-head), sandboxed
  physics.py      the physics floor: a time the guaranteed peaks cannot explain is refused
  verdicts.py     verdicts built from what the workers reported (failures, tampering, ...)
  stats.py        when the rounds are enough; noise and busy-CPU decisions
  clocks.py       clocks cross-checked (device events against the parent's wall clock)
  device_lock.py  timing holds the device alone; building and checking share it
  process.py      worker processes: start (from the fork server), talk, deadlines, memory

worker/   the worker processes (forked by wire/zygote.py; no verdict is decided there)
  entry.py        the entry points the fork server runs: reference_main, candidate_main
  judge.py        the judge: the reference's trials, the comparison, its timed blocks
  candidate.py    the candidate: trials under audit, timed blocks, kept outputs, samples
  common.py       what both workers share: loading the problem, building a model, hooks,
                  profiles, error reports
  harness.py      loading source, trial inputs, timing and profiling (clocks bound at import;
                  timing sets moved to fresh memory before CPU blocks)
  trial_values.py the tails trial's values: large, tiny and zero, each input's signs kept
  correctness.py  the comparison, in the outputs' own precision, a chunk at a time; complex
                  outputs as complex; the float64 answer where one may be noise
  audit.py        what the candidate dispatched to torch and which kernels it launched
  integrity.py    whether the candidate patched the functions a verdict rests on
  policy.py       the precision policies (strict, tf32, bf16, fp16)
  op_costs.py     the reference's FLOPs, counted op by op
  nsight.py       Nsight Compute's counters, from a child of the candidate's worker

sandbox/  the candidate's sandbox
  layout.py       as the parent plans it (env, folders, caches, the memory exchange)
  usage.py        from outside: its caps checked, what outlives the worker
  safe_open.py    reading what a candidate could have made: no FIFO, no link, bounded
  child.py        as the worker enters it: namespaces, then the steps below
  root.py         its file system: a new read-only root, or the fallback
  privileges.py   privileges dropped and the syscall filter
  libc.py         the system calls the sandbox makes through libc

wire/     what crosses between the processes (never pickle)
  messages.py     the one message table: each command, the worker that serves it, its
                  arguments, the candidate reply's shape (the parent and both workers use it)
  framing.py      length-prefixed JSON frames on the sockets, bounded
  zygote.py       the fork server: torch imported once, a worker forked per request
  transfer.py     outputs streamed from the candidate's worker to the judge's
"""
from __future__ import annotations

from ..guardrails import Guardrails
from ..problem import ProblemError
from ..result import Result
from .parent.figures import profile_note
from .parent.options import EvalOptions
from .parent.protocol import Evaluation, evaluate, verdict_of

__all__ = ["evaluate", "EvalOptions", "Guardrails", "ProblemError"]
