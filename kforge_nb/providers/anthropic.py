"""Claude through the official `anthropic` SDK, streamed, with the SDK's retries and backoff.

Honours ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL. 429, 5xx and 529 (overloaded) are retried by
the SDK with exponential backoff (and `retry-after` when the server sends it).
"""
from __future__ import annotations

import os

from .base import ProviderError, Reply

DEFAULT_MODEL = "claude-sonnet-4-6"


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, model: str | None = None, max_retries: int = 4, timeout_s: float = 600.0,
                 stream: bool = True):
        try:
            import anthropic
        except ImportError:
            raise ProviderError("the anthropic provider needs the SDK: pip install anthropic") \
                from None
        if not os.environ.get("ANTHROPIC_API_KEY"):
            raise ProviderError("no API key: set ANTHROPIC_API_KEY (or use --provider builtin)")
        self._sdk, self.stream = anthropic, stream
        self.model = model or os.environ.get("KFORGE_MODEL") or DEFAULT_MODEL
        # The SDK reads ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL itself; the key never passes here.
        self.client = anthropic.Anthropic(max_retries=max_retries, timeout=timeout_s)

    def complete(self, system: str, messages: list[dict], max_tokens: int) -> Reply:
        sdk = self._sdk
        try:
            request = dict(model=self.model, system=system, messages=messages,
                           max_tokens=max_tokens)
            if self.stream:   # long answers stream: no HTTP timeout on a 3-minute kernel
                with self.client.messages.stream(**request) as stream:
                    final = stream.get_final_message()
            else:
                final = self.client.messages.create(**request)
        except sdk.AuthenticationError:
            raise ProviderError("the Anthropic API rejected the key (401): set ANTHROPIC_API_KEY "
                                "to a valid key") from None
        except sdk.PermissionDeniedError as err:
            raise ProviderError(f"the Anthropic API refused the request (403): {err.message}") \
                from None
        except sdk.NotFoundError:
            raise ProviderError(f"model {self.model!r} not found (404): pass --model with a "
                                "model your key can use") from None
        except sdk.APIStatusError as err:
            raise ProviderError(f"the Anthropic API failed after retries ({err.status_code}): "
                                f"{err.message}") from None
        except sdk.APIConnectionError as err:
            raise ProviderError(f"cannot reach the Anthropic API ({err}); check the network or "
                                "ANTHROPIC_BASE_URL") from None
        text = "".join(block.text for block in final.content if block.type == "text")
        return Reply(text, final.usage.input_tokens, final.usage.output_tokens,
                     final.stop_reason or "", final.model)
