"""When to try a request again, and how long to wait first (no I/O).

:class:`RetryPolicy` is the table of what is retried; :func:`parse_retry_after` reads the service's
``Retry-After`` header (delay-seconds or an HTTP date).
"""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import Final

import attrs

from asyncsdk._checks import int_field, number_field

__all__ = [
    "IDEMPOTENT_METHODS",
    "RETRYABLE_STATUSES",
    "RetryPolicy",
    "header_value",
    "parse_retry_after",
]

#: Statuses worth another attempt: rate limited, or a gateway that could not reach the service.
RETRYABLE_STATUSES: Final = frozenset({429, 502, 503, 504})
#: Methods that may be repeated after the server may have seen them.  Every POST of this service
#: creates something that costs money and there is no idempotency key, so POST is not among them.
IDEMPOTENT_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})

_DELAY_SECONDS = re.compile(r"\d+(\.\d+)?")
_seconds = number_field("RetryPolicy.{name} must be a finite number of seconds >= 0")


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """When to try a request again, and how long to wait first.

    * 429 is retried for every method: the service refused without doing anything.
    * 502, 503 and 504 are retried for GET only.  A POST that drew one of them did reach a proxy
      that may have passed it on, and a repeated POST can create a second, paid-for process.
    * Network failures are retried for GET, and for POST only when the request surely never
      reached the server (refused connection, DNS failure, connect timeout); never a failed TLS
      handshake (another try would fail alike) nor a streamed body that cannot be sent again.
    * The wait is ``Retry-After`` when the answer carries one (seconds or an HTTP date), else
      exponential backoff with full jitter:
      ``uniform(0, min(backoff_max, backoff_initial * 2**n))``.
      A ``Retry-After`` longer than ``max_retry_after`` is not waited for: the error is raised at
      once and carries ``retry_after``.
    * A 429 without ``Retry-After`` on a process creation (``generation=True``) is not retried
      here: it is the generation limit (10 per 10 minutes), which a retry seconds later cannot
      pass; the client's generation limiter decides when to try again.
    """

    max_retries: int = attrs.field(
        default=3, validator=int_field("RetryPolicy.{name} must be an int >= 0", minimum=0)
    )
    backoff_initial: float = attrs.field(default=0.5, validator=_seconds)
    backoff_max: float = attrs.field(default=8.0, validator=_seconds)
    max_retry_after: float = attrs.field(default=60.0, validator=_seconds)

    def backoff(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        """Full-jitter delay before retry number ``attempt + 1`` (``attempt`` counts from 0)."""
        ceiling = min(self.backoff_max, self.backoff_initial * (2.0 ** min(attempt, 62)))
        return rand() * ceiling

    def after_status(
        self,
        method: str,
        attempt: int,
        status: int,
        headers: Mapping[str, str],
        *,
        replayable: bool = True,
        rand: Callable[[], float] = random.random,
        generation: bool = False,
    ) -> float | None:
        """Seconds to wait before retrying an answer with ``status``, or ``None`` to give up."""
        if attempt >= self.max_retries or not replayable or status not in RETRYABLE_STATUSES:
            return None
        if status != 429 and method.upper() not in IDEMPOTENT_METHODS:
            return None
        retry_after = parse_retry_after(headers)
        if retry_after is None:
            return None if status == 429 and generation else self.backoff(attempt, rand)
        if retry_after > self.max_retry_after:
            return None
        return retry_after

    def after_failure(
        self,
        method: str,
        attempt: int,
        *,
        request_sent: bool,
        replayable: bool = True,
        rand: Callable[[], float] = random.random,
    ) -> float | None:
        """Seconds to wait before retrying a network failure, or ``None`` to give up."""
        if attempt >= self.max_retries or not replayable:
            return None
        if request_sent and method.upper() not in IDEMPOTENT_METHODS:
            return None
        return self.backoff(attempt, rand)


def header_value(headers: Mapping[str, str], name: str) -> str | None:
    """The header ``name`` of a plain mapping, matched without regard to case."""
    value = headers.get(name)
    if value is not None:
        return value
    lowered = name.lower()
    for key, candidate in headers.items():
        if key.lower() == lowered:
            return candidate
    return None


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait according to ``Retry-After`` (delay-seconds or an HTTP date), else ``None``.

    A date in the past gives ``0.0``; an unreadable value gives ``None``.
    """
    value = header_value(headers, "Retry-After")
    if value is None:
        return None
    value = value.strip()
    if _DELAY_SECONDS.fullmatch(value):
        seconds = float(value)
        return seconds if math.isfinite(seconds) else None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)
