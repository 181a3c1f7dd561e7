"""Claude through the official `anthropic` SDK, streamed.

Honours ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL. 429, 5xx, 529 (overloaded), timeouts, dropped
connections and streams that stop half-way are retried with exponential backoff (and the
server's `retry-after` when it sends one) by `retry.call_with_retries`, within the run's
deadline; the SDK's own retries are off so that there is one policy. 400/401/403/404 fail at once.
"""
from __future__ import annotations

import os
import time

from .base import ProviderError, Reply
from .retry import (ATTEMPTS, BASE_DELAY, MAX_DELAY, Transient, api_message, call_with_retries,
                    classify_sdk_error)

try:      # the HTTP library under the SDK: a stream cut mid-body raises its errors unwrapped
    import httpx2 as _http
except ImportError:   # pragma: no cover - SDK generations built on httpx
    import httpx as _http

DEFAULT_MODEL = "claude-sonnet-4-6"
SERVICE = "the Anthropic API"
# an `error` event inside a stream that another try cannot fix
PERMANENT_ERROR_TYPES = {"invalid_request_error", "authentication_error", "permission_error",
                         "not_found_error"}


class IncompleteAnswer(Exception):
    """A stream that ended without `message_stop`: the connection closed half-way through."""


class AnthropicProvider:
    name = "anthropic"
    accepts_images = True          # image content blocks; its input_tokens count them
    # the Messages API of 2026-10-21, which the 2.x SDK speaks, has no sampling parameters:
    # a temperature (any, 1.0 too) is refused, so a round's samples differ by their prompts
    accepts_temperature = False

    def __init__(self, model: str | None = None, attempts: int = ATTEMPTS,
                 timeout_s: float = 600.0, stream: bool = True, base_delay: float = BASE_DELAY,
                 max_delay: float = MAX_DELAY):
        try:
            import anthropic
        except ImportError:
            raise ProviderError("the anthropic provider needs the SDK: pip install anthropic") \
                from None
        if not os.environ.get("ANTHROPIC_API_KEY"):
            raise ProviderError("no API key: set ANTHROPIC_API_KEY (or use --provider builtin)")
        self._sdk, self.stream = anthropic, stream
        self.model = model or os.environ.get("KFORGE_MODEL") or DEFAULT_MODEL
        self.attempts, self.timeout_s = attempts, timeout_s
        self.base_delay, self.max_delay = base_delay, max_delay
        self.sleep, self.clock = time.sleep, time.monotonic    # tests may stand in for time
        # The SDK reads ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL itself; the key never passes
        # here. max_retries=0: retries are ours, as only we know the run's deadline.
        self.client = anthropic.Anthropic(max_retries=0, timeout=timeout_s)

    def complete(self, system: str, messages: list[dict], max_tokens: int,
                 deadline: float | None = None) -> Reply:
        request = dict(model=self.model, system=system, messages=messages,
                       max_tokens=max_tokens)
        timeouts: list[float] = []      # each try's HTTP timeout, for a timeout's message

        def attempt(time_left: float | None):
            # an HTTP wait must not outlast the run's budget
            timeouts.append(self.timeout_s if time_left is None
                            else min(self.timeout_s, time_left))
            return self._once(request, timeouts[-1])

        final = call_with_retries(
            attempt, lambda err: self._classify(err, timeouts[-1] if timeouts else None),
            service=SERVICE, attempts=self.attempts, deadline=deadline, sleep=self.sleep,
            clock=self.clock, base_delay=self.base_delay, max_delay=self.max_delay)
        text = "".join(block.text for block in final.content if block.type == "text")
        return Reply(text, final.usage.input_tokens, final.usage.output_tokens,
                     final.stop_reason or "", final.model)

    def _once(self, request: dict, timeout: float):
        if not self.stream:
            return self.client.messages.create(**request, timeout=timeout)
        # Long answers stream: the timeout bounds each wait for data, not a 3-minute kernel.
        # A connection closed at a chunk boundary ends the stream quietly (the SDK then returns
        # a message without stop_reason, or none at all), so we look for message_stop ourselves.
        received, stopped = 0, False
        with self.client.messages.stream(**request, timeout=timeout) as stream:
            for event in stream:
                if event.type == "text":
                    received += len(event.text)
                stopped = stopped or event.type == "message_stop"
            if not stopped:
                raise IncompleteAnswer(f"the answer stream stopped half-way ({received} "
                                       "characters in, no message_stop)")
            return stream.get_final_message()

    def _classify(self, err: BaseException,
                  timeout: float | None) -> Transient | ProviderError | None:
        sdk = self._sdk
        if isinstance(err, IncompleteAnswer):
            return Transient(str(err))
        if isinstance(err, _http.TransportError):   # cut inside an HTTP chunk, mid-stream
            return Transient(f"the connection broke mid-answer ({type(err).__name__}: {err})")
        if isinstance(err, sdk.APIStatusError) and err.status_code == 200:
            # an `error` event inside a stream that began well (e.g. overloaded_error)
            if getattr(err, "type", None) in PERMANENT_ERROR_TYPES:
                return ProviderError(f"{SERVICE} failed mid-answer: {api_message(err)}")
            return Transient(f"an error event mid-answer ({api_message(err)})")
        return classify_sdk_error(
            err, sdk, service=SERVICE, key_variable="ANTHROPIC_API_KEY",
            url_variable="ANTHROPIC_BASE_URL", timeout=timeout,
            not_found=f"model {self.model!r} not found (404): pass --model with a model your key "
                      "can use")
