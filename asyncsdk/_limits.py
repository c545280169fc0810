"""Client-side limit on process creation, so callers wait instead of drawing 429s.

The service allows a fixed number of generations per sliding window per account (10 per 10 minutes
at the time of writing).  ``GenerationLimit`` keeps the start times of the calls inside the window
and makes the next caller sleep until the oldest leaves it.  Waiters are served in arrival order.
One instance may be shared by several clients that use the same account.
"""

from __future__ import annotations

import asyncio
import collections

import attrs

from asyncsdk._checks import int_field, number_field

__all__ = ["GenerationLimit"]


@attrs.define
class GenerationLimit:
    """At most ``max_calls`` process creations in any ``period`` seconds (a sliding window)."""

    max_calls: int = attrs.field(
        default=10, validator=int_field("GenerationLimit.{name} must be an int >= 1")
    )
    period: float = attrs.field(
        default=600.0,
        validator=number_field(
            "GenerationLimit.{name} must be a number of seconds > 0", above=True
        ),
    )
    _starts: collections.deque[float] = attrs.field(
        factory=collections.deque, init=False, repr=False
    )
    _lock: asyncio.Lock = attrs.field(factory=asyncio.Lock, init=False, repr=False)

    async def acquire(self) -> None:
        """Wait until one more call fits in the window, then count it.

        ``asyncio.Lock`` hands itself over in arrival order, so callers are served first come,
        first served; a cancelled caller leaves the queue without using a place in the window.
        """
        async with self._lock:
            loop = asyncio.get_running_loop()
            while True:
                now = loop.time()
                while self._starts and self._starts[0] <= now - self.period:
                    self._starts.popleft()
                if len(self._starts) < self.max_calls:
                    self._starts.append(now)
                    return
                await asyncio.sleep(self._starts[0] + self.period - now)
