"""Writes that settle a finished entry, tried again while the store does not answer.

An entry whose handlers ran stays held by this process (its claim renewed by the pool's
heartbeat) until the write that settles it (an ack, an atomic ack with the handlers' writes, a
retry or a dead letter) reaches the store.  A store that stalls or drops the connection for a
while therefore delays that write instead of leaving the entry to its claim's timeout, after
which another process would run the handlers again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

__all__ = ["until_stored"]

logger = logging.getLogger("webhooks")

T = TypeVar("T")

_FIRST_PAUSE: Final = 0.1
"""Seconds before the first new try of a write that failed; doubled at each failure..."""
_MAX_PAUSE: Final = 2.0
"""...up to this, so that a store back from a stall is written to within two seconds."""
_LOG_EVERY: Final = 15
"""A write failing again and again is logged at its first failure and every this many."""


async def until_stored(
    write: Callable[[], Awaitable[T]],
    what: str,
    *,
    again: tuple[type[Exception], ...],
) -> T:
    """``write()``'s answer, calling it again with backoff while it raises one of ``again``
    (any other exception is raised at once).  ``what`` names the write in the log.  Runs until
    the store answers or the caller is cancelled (the receiver stopping)."""
    pause = _FIRST_PAUSE
    failures = 0
    while True:
        try:
            answer = await write()
        except again as exc:
            failures += 1
            if failures % _LOG_EVERY == 1:
                logger.warning(
                    "%s failed (%d time(s), %r); trying again while the claim is renewed",
                    what,
                    failures,
                    exc,
                )
            await asyncio.sleep(pause)
            pause = min(_MAX_PAUSE, pause * 2)
            continue
        if failures:
            logger.warning("%s done after %d failed attempt(s)", what, failures)
        return answer
