"""A run's spec and its state, each one object, so that nothing the person passed in is written to.

    RunSpec    what was asked: the problem, the target, the agents, the evaluation options,
               the mode, the files the prompts include. Frozen: never changed by the run.
    RunState   what the run derives and keeps as it goes: its folder, the options it judges
               with (the spec's, in that folder), a resumed replay's position, the next
               iteration, the rounds without improvement, the agents it made, how it ended
               (a Finish).

The agents are made from `agents_for(spec, state)`: the spec's config with the precision the
evaluator judges by and the replay's position, a copy.

The Session holds one of each; the loop (loop.py) is handed both.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from ..agents import AgentConfig
from ..agents.base import AnalysisAgent, GenerationAgent, Recommendation
from ..evaluator import EvalOptions
from ..problem import Problem
from ..targets import Target
from .finish import Finish


@dataclass(frozen=True)
class RunSpec:
    problem: Problem
    target: Target
    agents: AgentConfig
    options: EvalOptions
    mode: str = "auto"                       # auto | review
    aux: tuple[str, ...] = ()                # --aux as given: PATH or PATH@0,2
    translate_from: str | None = None        # --from: the source of the kernel to translate

    @property
    def precision(self) -> str:
        """The precision policy, the evaluation options' (its one home): the agents write for
        the policy the evaluator judges by."""
        return self.options.precision


@dataclass
class RunState:
    folder: Path
    options: EvalOptions                     # the spec's, writing into this run's folder
    replay_from: dict | None = None          # {role: calls already played} (a resumed replay)
    next_iteration: int = 0                  # the first iteration not yet done
    stale_rounds: int = 0                    # optimisation rounds without improvement
    status: str = ""                         # run.json's: "" before the run, running, finished,
    #                                          interrupted
    finish: Finish | None = None             # how it ended; None while it runs
    generator: GenerationAgent | None = None   # the agents the run made from agents_for()
    analyst: AnalysisAgent | None = None
    provider_description: str = ""           # "anthropic:claude-...", for the views
    last_recommendation: Recommendation | None = None
    resume_notes: list[str] = field(default_factory=list)   # said when a resumed run starts


def state_for(spec: RunSpec, folder: Path) -> RunState:
    """A new run's state in `folder`."""
    return RunState(folder, dataclasses.replace(spec.options, out_dir=folder))


def agents_for(spec: RunSpec, state: RunState) -> AgentConfig:
    """The agents config the run makes its agents from: the spec's, with the evaluator's
    precision policy and a resumed replay's position (a copy: the spec's stays as given)."""
    return dataclasses.replace(spec.agents, precision=spec.precision,
                               replay_from=state.replay_from or spec.agents.replay_from)
