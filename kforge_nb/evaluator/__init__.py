"""Judge a model-written kernel against its PyTorch reference: (problem, candidate, target)
-> Result.

The package, by role (the protocol itself, top to bottom, is protocol.py's docstring):

In the parent process (decides every verdict)
  protocol.py     evaluate() and verdict_of(): static checks, availability, then `Evaluation`, which
                  drives both workers through the trials and decides the verdict
  options.py      EvalOptions: what a judging is asked to do; the trials' and timed calls' seeds
  jobs.py         the jobs both workers start with (the candidate's carries its sandbox plan)
  talk.py         sending commands to the workers and checking the candidate's replies
  replies.py      the shape every reply of the candidate's worker must have
  timing.py       the timed rounds (calibrated, interleaved, checked again), profiles, ncu
  rival.py        the best so far, timed beside the candidate (the head-to-head), sandboxed
  physics.py      the physics floor: a time the guaranteed peaks cannot explain is refused
  figures.py      a timing's numbers into the verdict: medians, intervals, policy, roofline
  verdicts.py     verdicts built from what the workers reported (failures, tampering, ...)
  stats.py        when the rounds are enough; noise and busy-CPU decisions
  clocks.py       clocks cross-checked (device events against the parent's wall clock)
  device_lock.py  timing holds the device alone; building and checking share it
  process.py      worker processes: start (from the fork server), talk, deadlines, memory
  sandbox.py      the candidate's sandbox as the parent plans it (env, folders, caches)
  sandbox_usage.py  the sandbox from outside: its caps checked, what outlives the worker
  safe_open.py    reading what a candidate could have made: no FIFO, no link, bounded

In the worker processes (forked from zygote.py; no verdict is decided there)
  workers.py          the entry points the fork server runs: reference_main, candidate_main
  judge_worker.py     the judge: the reference's trials, the comparison, its timed blocks
  candidate_worker.py the candidate: trials under audit, timed blocks, kept outputs, samples
  worker_common.py    what both workers share: loading the problem, building a model, hooks,
                      profiles, error reports
  harness.py          loading source, trial inputs, timing and profiling (clocks bound at import;
                      timing sets moved to fresh memory before CPU blocks)
  trial_values.py     the tails trial's values: large, tiny and zero, each input's signs kept
  correctness.py      the comparison, in the outputs' own precision, a chunk at a time;
                      complex outputs as complex; the float64 answer where one may be noise
  transfer.py         outputs streamed from the candidate's worker to the judge's
  audit.py            what the candidate dispatched to torch and which kernels it launched
  integrity.py        whether the candidate patched the functions a verdict rests on
  policy.py           the precision policies (strict, tf32, bf16, fp16)
  nsight.py           Nsight Compute's counters, from a child of the candidate's worker
  sandbox_child.py    the sandbox as the worker enters it: namespaces, then the steps below
  sandbox_root.py     its file system: a new read-only root, or the fallback
  sandbox_privileges.py  privileges dropped and the syscall filter
  sandbox_libc.py     the system calls the sandbox makes through libc
  zygote.py, wire.py  the fork server and the frames on its sockets

Shared by both sides
  messages.py     the one message table: each command, the worker that serves it, its
                  arguments, the candidate reply's shape
"""
from __future__ import annotations

from ..guardrails import Guardrails
from ..problem import ProblemError
from ..result import Result
from .figures import profile_note
from .options import EvalOptions
from .protocol import Evaluation, evaluate, verdict_of

__all__ = ["evaluate", "EvalOptions", "Guardrails", "ProblemError"]
