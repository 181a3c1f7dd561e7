"""The two agent roles and what flows between them and the session.

A generation agent turns a `GenerationRequest` (the problem, the target, feedback from the last
verdict, an instruction) into a `Generation` (a candidate's code, or the reason there is none).
An analysis agent turns an `AnalysisRequest` (the code and a compact profile summary) into ONE
`Recommendation`. LLM-backed agents render prompt templates and call a provider; the builtin
agents implement the same two methods without any model.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ..options import DEFAULT_PRECISION
from ..problem import Problem
from ..result import Result
from .history import Outcome


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    model: str = ""
    calls: int = 0
    unpriced_calls: int = 0       # calls to models with no known price: not in cost_usd

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(self.input_tokens + other.input_tokens,
                     self.output_tokens + other.output_tokens,
                     self.cost_usd + other.cost_usd, self.model or other.model,
                     self.calls + other.calls, self.unpriced_calls + other.unpriced_calls)


@dataclass
class GenerationRequest:
    problem: Problem
    target: str                          # target name
    kind: str                            # "initial", "fix" or "optimise"
    iteration: int = 0
    previous_code: str | None = None     # the candidate being fixed or optimised
    previous_result: Result | None = None
    instruction: str | None = None       # the accepted / edited / redirected recommendation
    action: dict | None = None           # the instruction's change as data (the accepted
    #                                      recommendation's `action`); None: only its text
    aux: list[tuple[str, str]] = field(default_factory=list)     # (name, text) files
    translate_from: str | None = None    # a verified kernel for another target
    sample: int = 0                      # the candidate's number in this round
    variant: int = 0                     # 0 takes the instruction as it is; k > 0 tries
    #                                      something else, numbered across the round's branches
    variation: str = ""                  # what this sample tries that the others do not
    variation_action: dict | None = None  # the change the variation asks for, as data
    precision: str = DEFAULT_PRECISION   # the evaluator's precision policy (strict, tf32, bf16, fp16)
    deadline: float | None = None        # time.monotonic() by which the run's wall-time budget
    #                                      ends: a provider retries only until then
    temperature: float | None = None     # a model's sampling temperature; None: its default
    parent: str | None = None            # the id of the candidate it starts from
    outcomes: list[Outcome] = field(default_factory=list)   # the earlier rounds' attempts
    #                                      and what came of them (history.outcomes)


@dataclass
class Generation:
    code: str | None                     # extracted candidate source; None = generation_failure
    response: str = ""                   # the raw answer
    messages: list[dict] = field(default_factory=list)   # the prompt as sent
    usage: Usage = field(default_factory=Usage)
    failure: str | None = None           # why there is no code (no block, truncated, empty)
    notes: str = ""                      # e.g. the builtin agent's coverage statement
    kept_ops: list[str] = field(default_factory=list)   # torch ops left in forward on purpose
                                         # (builtin agent only; passed to the guardrails' allow)
    knowledge: list[str] = field(default_factory=list)  # the knowledge notes in its prompt
    variation: str = ""                  # the request's variation, recorded with the sample
    temperature: float | None = None     # the temperature it was asked at (a model only)


@dataclass
class AnalysisRequest:
    problem: Problem
    target: str
    code: str
    result: Result                       # its verdict, timing, roofline, profile
    summary: dict                        # compact profile summary (feedback.profile_summary)
    history: list[str] = field(default_factory=list)   # earlier recommendations' titles
    iteration: int = 0
    deadline: float | None = None        # as in GenerationRequest
    objective: str = ""                  # the user's goal (--objective), with the best's values:
    #                                      "maximise tokens_per_s: candidate 1234.5, ..." or ""
    alternatives: int = 0                # also rank this many other changes (a round's samples)
    elsewhere: list[str] = field(default_factory=list)   # changes the round's other branches
    #                                      (beam, evolve) are trying: prefer a different one
    candidate: str | None = None         # the id of the candidate analysed
    outcomes: list[Outcome] = field(default_factory=list)   # as in GenerationRequest


@dataclass
class Recommendation:
    title: str                           # a few words: "fuse the scale into the softmax"
    text: str                            # what, why, expected gain
    expected_gain: str = ""
    action: dict = field(default_factory=dict)   # optional machine-readable hint;
                                         # {"kind": "done"} ends the session: nothing left to try
    usage: Usage = field(default_factory=Usage)
    messages: list[dict] = field(default_factory=list)
    response: str = ""
    alternatives: list[str] = field(default_factory=list)   # other changes, ranked after this
    #                                      one: what the round's other samples try
    pictures: list = field(default_factory=list)   # agents.pictures.Picture: what the analyst
                                         # was shown beside its prompt (saved next to it)


class GenerationAgent(Protocol):
    def generate(self, request: GenerationRequest) -> Generation: ...


class AnalysisAgent(Protocol):
    # whether it reads Nsight Compute's counters in the profile summary (a session asks the
    # evaluator for them, at a cost, only for an analyst that does; absent means it does)
    reads_counters: bool

    def analyse(self, request: AnalysisRequest) -> Recommendation: ...
