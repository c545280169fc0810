"""Client-side limit on process creation, so callers wait instead of drawing 429s.

The service allows a fixed number of generations per sliding window per account (10 per 10 minutes
at the time of writing).  ``GenerationLimit`` keeps the start times of the calls inside the window
and makes the next caller sleep until the oldest leaves it.  Waiters are served in arrival order.
One instance may be shared by several clients that use the same account.

When the service refuses a generation anyway (another program spends the same account),
:meth:`GenerationLimit.refused` fills the window, so that the callers go on at the limit's steady
pace (one every ``period / max_calls`` seconds) instead of retrying at once.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib

import attrs

from asyncsdk._checks import int_field, number_field
from asyncsdk._errors import ConfigurationError

__all__ = ["GenerationLimit", "client_generation_limit"]


@attrs.define
class GenerationLimit:
    """At most ``max_calls`` process creations in any ``period`` seconds (a sliding window).

    ``Client`` creates one of its own (10 per 600 s) unless given another, or ``None`` to turn
    pacing off.  :meth:`acquire` waits for a place; :meth:`wait_time` says how long that would be;
    :meth:`release` gives back the place of a call that was never sent.
    """

    max_calls: int = attrs.field(
        default=10, validator=int_field("GenerationLimit.{name} must be an int >= 1")
    )
    period: float = attrs.field(
        default=600.0,
        validator=number_field(
            "GenerationLimit.{name} must be a finite number of seconds > 0", above=True
        ),
    )
    _starts: collections.deque[float] = attrs.field(
        factory=collections.deque, init=False, repr=False
    )
    _lock: asyncio.Lock = attrs.field(factory=asyncio.Lock, init=False, repr=False)
    _wakeup: asyncio.Future[None] | None = attrs.field(default=None, init=False, repr=False)
    """The wait of the caller waiting for a place (one at a time: it holds the lock), which
    :meth:`release` ends early.  A future of the waiting loop's own, so that one limit serves
    the clients of several event loops in turn."""

    @property
    def pace(self) -> float:
        """Seconds between two generations at the limit's steady rate (``period / max_calls``)."""
        return self.period / self.max_calls

    async def acquire(self) -> float:
        """Wait until one more call fits in the window, then count it; return when it was counted
        (the loop's clock), which :meth:`settle` takes.

        ``asyncio.Lock`` hands itself over in arrival order, so callers are served first come,
        first served; a cancelled caller leaves the queue without using a place in the window.
        """
        async with self._lock:
            loop = asyncio.get_running_loop()
            while True:
                wait = self.wait_time(loop.time())
                if wait <= 0:
                    now = loop.time()
                    self._starts.append(now)
                    return now
                self._wakeup = loop.create_future()
                try:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(wait):
                            await self._wakeup
                finally:
                    self._wakeup = None

    def release(self, counted: float) -> None:
        """The call counted at ``counted`` was never sent (its uploads failed, say): give its
        place back, to the caller waiting first if there is one."""
        if counted in self._starts:
            self._starts.remove(counted)
            if self._wakeup is not None and not self._wakeup.done():
                self._wakeup.set_result(None)

    def settle(self, counted: float, now: float | None = None) -> None:
        """The call counted at ``counted`` reached the service only now: count it from now.

        The service counts a generation when it receives it; a place taken before the uploads
        of ``Client.run`` is moved to the time the creation was answered, so the window here
        never runs ahead of the service's.
        """
        if now is None:
            now = asyncio.get_running_loop().time()
        if counted in self._starts:
            self._starts.remove(counted)
        self._starts = collections.deque(sorted([*self._starts, now]))

    def wait_time(self, now: float | None = None) -> float:
        """Seconds until one more call fits in the window (0.0 when one fits now).

        ``now`` is the running loop's clock (``loop.time()``), read here when not given.
        """
        if now is None:
            now = asyncio.get_running_loop().time()
        while self._starts and self._starts[0] <= now - self.period:
            self._starts.popleft()
        if len(self._starts) < self.max_calls:
            return 0.0
        return self._starts[0] + self.period - now

    def refused(self, now: float | None = None) -> None:
        """Note that the service refused a generation now (a 429 without ``Retry-After``).

        The window is counted as full: the places this limit did not use itself are taken by
        stand-ins that leave one every :attr:`pace` seconds from now, so the next callers go on at
        the steady rate, the first of them one pace from now.
        """
        if now is None:
            now = asyncio.get_running_loop().time()
        self.wait_time(now)  # forget the starts that left the window
        missing = self.max_calls - len(self._starts)
        stand_ins = [now - self.period + self.pace * (n + 1) for n in range(missing)]
        self._starts = collections.deque(sorted([*self._starts, *stand_ins]))
        if self._starts and self._starts[0] + self.period < now + self.pace:
            # Full with our own recent calls: the service still refused, so wait one pace anyway.
            self._starts.popleft()
            self._starts.append(now - self.period + self.pace)
            self._starts = collections.deque(sorted(self._starts))


def client_generation_limit(value: object) -> GenerationLimit | None:
    """``Client(generation_limit=...)``: ``"default"`` for a limit of the client's own (the
    service's 10 per 600 s), a ``GenerationLimit`` (shared, perhaps), or ``None`` for no pacing."""
    if value == "default":
        return GenerationLimit()
    if value is not None and not isinstance(value, GenerationLimit):
        raise ConfigurationError(
            "generation_limit must be a GenerationLimit(max_calls=..., period=...), or None "
            "to turn pacing off"
        )
    return value
