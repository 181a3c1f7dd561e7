"""BuiltinGenerator: the generation role without a model.

Every candidate it writes carries a `# kforge-builtin: {...}` line recording the target, the
knobs it was written with and the facts of its code the analyst reads (candidate.py). An
"optimise" request starts from the previous candidate's knobs and applies the request's action
(actions.py: data on the request, or read once off its text), said "applied" only where the
kernel written with it changes; "fix" writes the most conservative version (libm maths, double
accumulators); "initial" uses the defaults. Extra samples of a round sweep the knobs
(sweep.py). The target is looked up in the table of targets.py.
"""
from __future__ import annotations

import dataclasses

from ..base import Generation, GenerationRequest
from .actions import apply_all, asked, parse_action
from .assemble import Built
from .candidate import read_header
from .capture import CaptureError, PartitionError, capture, partition
from .sweep import kernel_text, vary, what_runs
from .targets import TARGETS

FIX = "conservative version: library maths, double accumulators, default parallelism"


class BuiltinGenerator:
    """Deterministic generation agent: captures the reference, fuses, writes kernels."""

    def generate(self, request: GenerationRequest) -> Generation:
        target = TARGETS.get(request.target)
        if target is None:
            return Generation(None, failure=f"builtin agent cannot lower: it writes "
                              f"{' and '.join(TARGETS)} kernels, not {request.target}")
        ask = asked(request)                # the request's words read here, once
        options = self.start(request, target)
        lowered = self.lower(request)
        runs = self.runs(request, lowered)
        applied, instructed = "", frozenset()   # the knobs the instruction set: the sweep keeps them
        if request.kind == "optimise":
            before = options
            options, said = apply_all(options, ask, target.conservative, runs)
            applied = "; ".join(said)      # each clause of a person's words answered
            instructed = frozenset(f.name for f in dataclasses.fields(options)
                                   if getattr(options, f.name) != getattr(before, f.name))
        elif request.kind == "fix":
            options, applied = target.conservative(), FIX
        varied = ""
        if request.variant and not ask.own_change:
            options, varied = vary(target, options, request.variant, runs, instructed)
            applied = "; ".join(filter(None, [applied, varied]))
        built = self.write(request, lowered, options)
        if built.code is None:
            return Generation(None, response=built.failure or "", failure=built.failure,
                              notes=built.failure or "")
        notes = "; ".join(built.coverage + ([applied] if applied else []))
        response = (f"builtin agent ({request.kind}): {len(built.kernels)} kernel(s) for "
                    f"{target.name}. {notes}")
        return Generation(built.code, response=response, notes=notes,
                          kept_ops=list(built.kept_ops),
                          variation=varied or (request.variation if ask.own_change else ""))

    @staticmethod
    def start(request: GenerationRequest, target):
        """The knobs to start from: the target's defaults for the precision policy, with the
        previous candidate's where it is improved on or fixed."""
        defaults = target.defaults(request.precision)
        header = read_header(request.previous_code)
        if header.get("target") == target.name and request.kind in ("optimise", "fix"):
            known = {f.name for f in dataclasses.fields(defaults)}
            return dataclasses.replace(defaults, **{k: v for k, v in
                                                    header.get("options", {}).items()
                                                    if k in known})
        return defaults

    def runs(self, request: GenerationRequest, lowered):
        """knobs -> what the kernel written with them runs (sweep.what_runs), each set of knobs
        written once: what tells an applied change from one that changes nothing."""
        written: dict = {}

        def of(options):
            if repr(options) not in written:
                written[repr(options)] = what_runs(self.write(request, lowered, options))
            return written[repr(options)]
        return of

    @staticmethod
    def lower(request: GenerationRequest):
        """The reference captured and partitioned into fused groups, or why it cannot be."""
        try:
            captured = capture(request.problem.source)
            return captured, partition(captured.graph)
        except (CaptureError, PartitionError) as err:
            return f"builtin agent cannot lower: {err}"

    @staticmethod
    def write(request: GenerationRequest, lowered, options) -> Built:
        if isinstance(lowered, str):
            return Built(None, failure=lowered)
        captured, plan = lowered
        problem = request.problem
        return TARGETS[request.target].write(problem.name, problem.source, captured, plan,
                                             options)


__all__ = ["BuiltinGenerator", "kernel_text", "parse_action"]
