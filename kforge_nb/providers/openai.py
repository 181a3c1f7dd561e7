"""Any OpenAI-compatible chat endpoint (vLLM, llama.cpp server, Ollama) via the `openai` package.

Set OPENAI_BASE_URL (e.g. http://localhost:8000/v1) and OPENAI_API_KEY (any text for local
servers); `--model` names the served model.
"""
from __future__ import annotations

import os

from .base import ProviderError, Reply


class OpenAIProvider:
    name = "openai"

    def __init__(self, model: str | None = None, max_retries: int = 4):
        try:
            import openai
        except ImportError:
            raise ProviderError("the openai provider needs: pip install 'kforge-nb[openai]'") \
                from None
        self.model = model or os.environ.get("KFORGE_MODEL") or ""
        if not self.model:
            raise ProviderError("the openai provider needs --model (the served model's name)")
        self._sdk = openai
        self.client = openai.OpenAI(api_key=os.environ.get("OPENAI_API_KEY", "not-needed"),
                                    max_retries=max_retries)

    def complete(self, system: str, messages: list[dict], max_tokens: int) -> Reply:
        try:
            answer = self.client.chat.completions.create(
                model=self.model, max_tokens=max_tokens,
                messages=[{"role": "system", "content": system}, *messages])
        except self._sdk.APIError as err:
            raise ProviderError(f"the OpenAI-compatible endpoint failed: {err}") from None
        choice = answer.choices[0]
        usage = answer.usage
        return Reply(choice.message.content or "", usage.prompt_tokens if usage else 0,
                     usage.completion_tokens if usage else 0, choice.finish_reason or "",
                     answer.model)
