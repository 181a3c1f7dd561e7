"""Any OpenAI-compatible chat endpoint (vLLM, llama.cpp server, Ollama) via the `openai` package.

Set OPENAI_BASE_URL (e.g. http://localhost:8000/v1) and OPENAI_API_KEY (any text for local
servers); `--model` names the served model. Failures are retried as for the anthropic provider
(`retry.call_with_retries`; the SDK's own retries are off).
"""
from __future__ import annotations

import os
import time

from .base import ProviderError, Reply, sampling
from .retry import (ATTEMPTS, BASE_DELAY, MAX_DELAY, Transient, call_with_retries,
                    classify_sdk_error)

SERVICE = "the OpenAI-compatible endpoint"


class OpenAIProvider:
    name = "openai"
    accepts_images = True          # assumed (a vision model); --no-images for one that is not
    accepts_temperature = True

    def __init__(self, model: str | None = None, attempts: int = ATTEMPTS,
                 timeout_s: float = 600.0, base_delay: float = BASE_DELAY,
                 max_delay: float = MAX_DELAY):
        try:
            import openai
        except ImportError:
            raise ProviderError("the openai provider needs: pip install 'kforge-nb[openai]'") \
                from None
        self.model = model or os.environ.get("KFORGE_MODEL") or ""
        if not self.model:
            raise ProviderError("the openai provider needs --model (the served model's name)")
        self._sdk = openai
        self.attempts, self.timeout_s = attempts, timeout_s
        self.base_delay, self.max_delay = base_delay, max_delay
        self.sleep, self.clock = time.sleep, time.monotonic    # tests may stand in for time
        # max_retries=0: retries are ours, as only we know the run's deadline
        self.client = openai.OpenAI(api_key=os.environ.get("OPENAI_API_KEY", "not-needed"),
                                    max_retries=0, timeout=timeout_s)

    def complete(self, system: str, messages: list[dict], max_tokens: int,
                 deadline: float | None = None, temperature: float | None = None) -> Reply:
        timeouts: list[float] = []      # each try's HTTP timeout, for a timeout's message

        def attempt(time_left: float | None):
            # an HTTP wait must not outlast the run's budget
            timeouts.append(self.timeout_s if time_left is None
                            else min(self.timeout_s, time_left))
            return self.client.chat.completions.create(
                model=self.model, max_tokens=max_tokens, timeout=timeouts[-1],
                **sampling(temperature),
                messages=[{"role": "system", "content": system},
                          *(openai_message(m) for m in messages)])

        answer = call_with_retries(
            attempt, lambda err: self._classify(err, timeouts[-1] if timeouts else None),
            service=SERVICE, attempts=self.attempts, deadline=deadline, sleep=self.sleep,
            clock=self.clock, base_delay=self.base_delay, max_delay=self.max_delay)
        choice = answer.choices[0]
        usage = answer.usage
        return Reply(choice.message.content or "", usage.prompt_tokens if usage else 0,
                     usage.completion_tokens if usage else 0, choice.finish_reason or "",
                     answer.model)

    def _classify(self, err: BaseException,
                  timeout: float | None) -> Transient | ProviderError | None:
        return classify_sdk_error(
            err, self._sdk, service=SERVICE, key_variable="OPENAI_API_KEY",
            url_variable="OPENAI_BASE_URL", timeout=timeout,
            not_found=f"model {self.model!r} not found (404): pass --model with a model the "
                      "endpoint serves, and check OPENAI_BASE_URL (it usually ends in /v1)")


def openai_message(message: dict) -> dict:
    """A message as the chat-completions API takes it: text content as it is, image blocks (the
    agents write Anthropic's form) as `image_url` parts holding a data URL."""
    if isinstance(message.get("content"), str):
        return message
    parts = [{"type": "image_url", "image_url": {
                 "url": f"data:{b['source']['media_type']};base64,{b['source']['data']}"}}
             if b.get("type") == "image" else b for b in message["content"]]
    return {**message, "content": parts}
