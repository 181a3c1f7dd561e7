"""A model behind one small interface: messages in, text and token counts out."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class ProviderError(RuntimeError):
    """A provider failed in a way the user must act on; the message says how."""


@dataclass
class Reply:
    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    stop_reason: str = ""        # "end_turn", "max_tokens", ...
    model: str = ""

    @property
    def truncated(self) -> bool:
        return self.stop_reason in ("max_tokens", "length")


class Provider(Protocol):
    name: str
    model: str
    # optional: True when `content` may also be a list of blocks holding images (the Anthropic
    # form, {"type": "image", "source": {"type": "base64", ...}}); absent means text only
    accepts_images: bool
    # optional: True when `complete` takes a sampling `temperature`; absent means it does not
    accepts_temperature: bool

    def complete(self, system: str, messages: list[dict], max_tokens: int,
                 deadline: float | None = None, temperature: float | None = None) -> Reply:
        """One model call. `messages` are {"role": "user"|"assistant", "content": str}
        (or a list of blocks, for a provider that accepts images). `temperature` (only for a
        provider that accepts one) is passed to tell a round's samples apart.
        `deadline` (a time.monotonic() value, or None) is when the run's wall-time budget ends:
        a provider retries failures only until then, and raises ProviderError after."""
        ...


def sampling(temperature: float | None) -> dict:
    """The keyword arguments that ask for `temperature`: none for None, so that a provider
    that takes no temperature is called as before."""
    return {} if temperature is None else {"temperature": temperature}
