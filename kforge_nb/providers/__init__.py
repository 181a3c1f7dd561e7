"""Model providers, found through the `kforge_nb.providers` entry-point group.

`anthropic` (default when ANTHROPIC_API_KEY is set), `openai` (OpenAI-compatible endpoints),
`replay` (a recording) and `builtin` (the offline agent: no model at all, so it has no provider
object; `agents.make_agents` handles it).
"""
from __future__ import annotations

import os
from importlib.metadata import entry_points

from .base import Provider, ProviderError, Reply

BUILTIN = {
    "anthropic": "kforge_nb.providers.anthropic:AnthropicProvider",
    "openai": "kforge_nb.providers.openai:OpenAIProvider",
}
NO_KEY_NOTICE = ("no ANTHROPIC_API_KEY set: using the builtin offline agent (deterministic, no "
                 "LLM). Set the key or pass --provider to use a model.")


def registry() -> dict[str, str]:
    specs = dict(BUILTIN)
    specs.update({ep.name: ep.value for ep in entry_points(group="kforge_nb.providers")})
    return specs


def names() -> list[str]:
    return sorted({*registry(), "replay", "builtin"})


def resolve(name: str | None) -> tuple[str, str | None]:
    """The provider to use for `auto`/None, and a notice to show when it was a fallback."""
    if name in (None, "", "auto"):
        if os.environ.get("ANTHROPIC_API_KEY"):
            return "anthropic", None
        return "builtin", NO_KEY_NOTICE
    if name not in names():
        raise ProviderError(f"unknown provider {name!r}; choose one of: auto, {', '.join(names())}")
    return name, None


def get_provider(name: str, model: str | None = None) -> Provider:
    module, _, attr = registry()[name].partition(":")
    return getattr(__import__(module, fromlist=[attr]), attr)(model=model)


__all__ = ["Provider", "ProviderError", "Reply", "resolve", "get_provider", "names"]
