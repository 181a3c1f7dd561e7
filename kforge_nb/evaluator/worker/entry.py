"""The two child processes of an evaluation. Neither decides a verdict; the parent does.

* The judge runs the user's `Model` and never candidate code. For each trial it draws the
  inputs from the trial's seed on the device, computes the reference outputs, and compares the
  candidate's outputs (and its inputs as the candidate left them) with them, on the device, a
  chunk at a time. It times the reference, block by block, interleaved with the candidate.
* The candidate worker runs in the sandbox. It draws the same inputs from the same seeds (the
  problem's `get_inputs` is loaded before the candidate, and guarded), runs the candidate under
  the audit of what it dispatched and launched, and streams its outputs to a file for the judge.

Both are forked from a server that has already imported torch. Commands and replies are plain
tuples and dicts over a pipe; the parent drives both, one step at a time.

This module is the two entry points the fork server (zygote.py) runs by name; the judge lives in
worker/judge.py, the candidate in worker/candidate.py, what both share in worker/common.py.
"""
from __future__ import annotations

from .candidate import candidate_main
from .judge import reference_main

__all__ = ["candidate_main", "reference_main"]
