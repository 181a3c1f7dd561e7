"""Generation and analysis agents, and how a session gets a pair of them."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..options import DEFAULT_PRECISION
from ..providers import get_provider, resolve
from ..providers.recording import Recorder, ReplayProvider
from .base import (AnalysisAgent, AnalysisRequest, Generation, GenerationAgent,
                   GenerationRequest, Recommendation, Usage)
from .prompts import Prompts


@dataclass
class AgentConfig:
    provider: str | None = "auto"
    model: str | None = None
    analysis_provider: str | None = None     # defaults to `provider`
    analysis_model: str | None = None        # defaults to `model`
    record: str | None = None                # append every call to this JSONL file
    replay: str | None = None                # play calls back from this file
    replay_from: dict | None = None          # {role: calls already played} (a resumed run)
    prompts_dir: str | None = None
    prompt_append: dict | None = None
    hint: str = ""
    precision: str = DEFAULT_PRECISION
    max_tokens: int = 8192
    knowledge_dirs: list[str] = field(default_factory=list)   # --knowledge: folders of notes
    images: bool = True                      # pictures of the profile for an analyst whose
    #                                          provider accepts them (--no-images: text only)
    ncu: bool = True                         # Nsight Compute's counters in its summary, where
    #                                          ncu can read them (--no-ncu: none)
    temperatures: tuple[float, ...] | None = None   # per sample of a round (--temperatures);
    #                                          None: sample_temperature()'s spread
    analyst: object | None = None            # an AnalysisAgent of your own (a script, a rule
    #                                          set): replaces the provider's analysis role


def make_agents(config: AgentConfig) -> tuple[GenerationAgent, AnalysisAgent, str, list[str]]:
    """(generator, analyst, provider description, notices) for a session."""
    notices: list[str] = []
    name, notice = resolve("replay" if config.replay else config.provider)
    if notice:
        notices.append(notice)
    if name == "builtin":
        from .builtin import BuiltinAnalyst, BuiltinGenerator
        return BuiltinGenerator(), config.analyst or BuiltinAnalyst(), \
            "builtin (offline, no LLM)", notices

    def provider_for(role: str, provider_name: str, model: str | None):
        if config.replay:
            return ReplayProvider(config.replay, role,
                                  start=(config.replay_from or {}).get(role, 0))
        provider = get_provider(provider_name, model)
        return Recorder(provider, config.record, role) if config.record else provider

    prompts = Prompts(config.prompts_dir, config.prompt_append or {})
    from . import pictures
    from .llm import LLMAnalyst, LLMGenerator
    gen_provider = provider_for("generation", name, config.model)
    analysis_name = config.analysis_provider or name
    ana_provider = provider_for("analysis", analysis_name, config.analysis_model or config.model)
    generator = LLMGenerator(gen_provider, prompts, config.max_tokens, config.hint,
                             config.precision, knowledge_dirs=config.knowledge_dirs)
    analyst = config.analyst or LLMAnalyst(ana_provider, prompts, images=config.images,
                                           precision=config.precision)
    if isinstance(analyst, LLMAnalyst) and analyst.images and not pictures.available():
        notices.append("the analyst gets no pictures of the profile: matplotlib is not "
                       "installed (pip install matplotlib)")
    if config.temperatures and not generator.takes_temperature:
        notices.append(f"--temperatures ignored: the {gen_provider.name} provider takes no "
                       "sampling temperature (Anthropic's Messages API has none since "
                       "2026-10-21); a round's samples differ by what their prompts ask")
    description = f"{gen_provider.name}:{gen_provider.model}"
    if ana_provider.model != gen_provider.model:
        description += f" (analysis {ana_provider.name}:{ana_provider.model})"
    return generator, analyst, description, notices


__all__ = ["AgentConfig", "make_agents", "Generation", "GenerationRequest", "Recommendation",
           "AnalysisRequest", "Usage"]
