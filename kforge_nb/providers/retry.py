"""One retry policy for every model API: exponential backoff within the run's time budget.

The SDKs' own retries are turned off (`max_retries=0`) so that this loop is the only one and it
knows the run's deadline: it never sleeps into, nor starts a try past, the end of the budget.
A provider supplies `attempt(time_left)` (one call; `time_left` bounds its HTTP timeout) and
`classify(err)`, which sorts an exception into a `Transient` failure (worth another try), a
`ProviderError` (retrying cannot fix it: raised at once) or None (not an API failure: a bug,
re-raised untouched).

Each retry is said: a warning on the `kforge_nb.providers` logger, and a call to the listener
that `reporting(callback)` installs for the calls made in its context (the session turns it
into a `retry` event: the attempt, the reason, the wait).
"""
from __future__ import annotations

import contextlib
import contextvars
import email.utils
import logging
import os
import random
import time
from dataclasses import dataclass
from typing import Callable, TypeVar

from .base import ProviderError

T = TypeVar("T")

ATTEMPTS = 5            # tries per call, the first included
BASE_DELAY = 1.0        # seconds before the first retry; doubles each time
MAX_DELAY = 60.0        # no wait is longer, a server's retry-after included
KEY_VARIABLES = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")
LOG = logging.getLogger("kforge_nb.providers")
LOG.addHandler(logging.NullHandler())   # unconfigured, Python would print it to stderr (a red
#                                         box in a notebook): the `retry` event is what is shown
LISTENER: contextvars.ContextVar[Callable[[dict], None] | None] = \
    contextvars.ContextVar("kforge_retry_listener", default=None)


@dataclass
class Transient:
    """A failure that another try may not meet: 429, 5xx, 529, a timeout, a broken connection."""
    what: str                          # "HTTP 503 (api_error: ...)", "no answer within 10 s"
    retry_after: float | None = None   # seconds the server asked us to wait, if it said
    hint: str = ""                     # what the user can do if it never clears
    reason: str = ""                   # in a word or two: "timeout", "HTTP 429", "connection"


@contextlib.contextmanager
def reporting(callback: Callable[[dict], None]):
    """Calls made in this context (and in contexts copied from it) tell `callback` of each
    retry: {"service", "attempt" (the failed one), "attempts", "reason", "what", "wait_s"}."""
    token = LISTENER.set(callback)
    try:
        yield
    finally:
        LISTENER.reset(token)


def said_retry(service: str, failed: int, attempts: int, why: Transient, wait: float) -> None:
    """One retry, said: a log line and the listener's call (a listener's bug never stops the
    call being retried)."""
    what = redact(why.what)
    LOG.warning("%s: attempt %d of %d failed (%s); retrying in %.1f s", service, failed,
                attempts, what, wait)
    listener = LISTENER.get()
    if listener is not None:
        try:
            listener({"service": service, "attempt": failed, "attempts": attempts,
                      "reason": why.reason or what, "what": what, "wait_s": round(wait, 3)})
        except Exception:       # noqa: BLE001
            LOG.exception("the retry listener failed")


def call_with_retries(attempt: Callable[[float | None], T],
                      classify: Callable[[BaseException], Transient | ProviderError | None], *,
                      service: str, attempts: int = ATTEMPTS, deadline: float | None = None,
                      sleep: Callable[[float], None] = time.sleep,
                      clock: Callable[[], float] = time.monotonic,
                      base_delay: float = BASE_DELAY, max_delay: float = MAX_DELAY) -> T:
    """`attempt(time_left)` until it returns, a failure cannot be retried, `attempts` are used
    up, or the next try would start after `deadline` (a `clock()` value; None: no deadline)."""
    last: Transient | None = None
    for n in range(1, attempts + 1):
        time_left = None if deadline is None else deadline - clock()
        if time_left is not None and time_left <= 0:
            raise ProviderError(redact(gave_up(service, last, n - 1, "the run's wall-time budget "
                                                                     "ended before the next try")))
        try:
            return attempt(time_left)
        except Exception as err:
            verdict = classify(err)
            if verdict is None:
                raise
            if isinstance(verdict, ProviderError):
                raise ProviderError(redact(str(verdict))) from None
            last = verdict
        if n == attempts:
            break
        delay = backoff(n, last.retry_after, base_delay, max_delay)
        if deadline is not None and clock() + delay >= deadline:
            raise ProviderError(redact(gave_up(
                service, last, n, f"the run's wall-time budget ends before the next try "
                                  f"(due in {delay:.1f} s)")))
        said_retry(service, n, attempts, last, delay)
        sleep(delay)
    raise ProviderError(redact(gave_up(service, last, attempts,
                                       f"attempts used up ({attempts} allowed)")))


def backoff(failures: int, retry_after: float | None, base_delay: float,
            max_delay: float) -> float:
    """Seconds to wait after the `failures`-th failure: what the server asked for when it said,
    else base * 2^(failures-1) with jitter (so clients that failed together do not retry in
    step); capped either way."""
    if retry_after is not None and retry_after > 0:   # 0 says nothing: back off
        return min(retry_after, max_delay)
    return min(base_delay * 2 ** (failures - 1), max_delay) * random.uniform(0.75, 1.0)


def gave_up(service: str, last: Transient | None, tries: int, why: str) -> str:
    if last is None:     # the budget was spent before the first try
        return f"no call to {service} was made: {why}"
    text = (f"{service} failed: {last.what}; gave up after {tries} "
            f"attempt{'s' if tries != 1 else ''}: {why}")
    return f"{text}. {last.hint}" if last.hint else text


def retry_after_seconds(headers) -> float | None:
    """The wait a response asks for: `retry-after-ms`, else `retry-after` (seconds or a date)."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) / scale
        except ValueError:
            pass
        when = email.utils.parsedate_tz(value)
        if when is not None:
            return max(0.0, email.utils.mktime_tz(when) - time.time())
    return None


def redact(text: str) -> str:
    """Never show a key, whatever an SDK or a server put into an error's text."""
    for variable in KEY_VARIABLES:
        key = os.environ.get(variable, "")
        if len(key) >= 8:
            text = text.replace(key, f"${variable}")
    return text


def classify_sdk_error(err: BaseException, sdk, *, service: str, key_variable: str,
                       url_variable: str, not_found: str,
                       timeout: float | None) -> Transient | ProviderError | None:
    """Sorts the errors of the `anthropic` and `openai` SDKs (both share one class tree)."""
    if isinstance(err, sdk.AuthenticationError):
        return ProviderError(f"{service} rejected the key (401): set {key_variable} to a valid "
                             "key")
    if isinstance(err, sdk.PermissionDeniedError):
        return ProviderError(f"{service} refused the request (403): {api_message(err)}")
    if isinstance(err, sdk.NotFoundError):
        return ProviderError(f"{not_found} (the server said: {api_message(err)})")
    if isinstance(err, sdk.APIStatusError):
        status = err.status_code
        if status in (408, 429) or status >= 500:   # 529: overloaded
            hint = ("The key's rate limit was hit: wait, or ask for fewer samples at once"
                    if status == 429 else "The service is in trouble: try again later")
            return Transient(f"HTTP {status} ({api_message(err)})",
                             retry_after_seconds(err.response.headers), hint, f"HTTP {status}")
        return ProviderError(f"{service} rejected the request ({status}): {api_message(err)}")
    if isinstance(err, sdk.APITimeoutError):   # before APIConnectionError: it is one
        within = f" within the {timeout:g} s timeout" if timeout is not None else ""
        return Transient(f"no answer{within}", hint=f"Check the network or {url_variable}",
                         reason="timeout")
    if isinstance(err, sdk.APIConnectionError):
        cause = err.__cause__
        return Transient("the connection failed" + (f" ({type(cause).__name__}: {cause})"
                                                    if cause else ""),
                         hint=f"Cannot reach {service}? Check the network or {url_variable}",
                         reason="connection")
    if isinstance(err, sdk.APIError):    # e.g. an answer that does not parse
        return ProviderError(f"{service} failed: {err}")
    return None


def api_message(err) -> str:
    """The server's own words for an error, not the SDK's 'Error code: 503 - {...}' dump."""
    body = getattr(err, "body", None)
    inner = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(inner, dict) and inner.get("message"):
        kind = inner.get("type")
        return f"{kind}: {inner['message']}" if kind else str(inner["message"])
    return str(getattr(err, "message", err))
