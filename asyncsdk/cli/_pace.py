"""Pacing ``process`` to the service's generation limit, and saying why and until when.

The service allows ``calls`` generations in any ``period`` seconds per account (10 per 10 minutes
at the time of writing).  :func:`slots` is the schedule that limit allows (pure arithmetic);
:class:`Pacer` waits for the next slot, reports the wait, and hands each slot used to a callback
(the command writes it to its journal, so that a second run knows the slots of the first and
resumes the pace instead of drawing 429s).  Times are wall-clock seconds (``time.time()``),
since they outlive the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator, Callable, Iterable

import attrs

from asyncsdk.cli._exits import UsageError

__all__ = [
    "DEFAULT_LIMIT",
    "GenerationPace",
    "Pacer",
    "about",
    "least_time",
    "parse_limit",
    "roughly",
    "slots",
    "span",
]


@attrs.frozen
class GenerationPace:
    """At most ``calls`` generations in any ``period`` seconds."""

    calls: int
    period: float

    def __str__(self) -> str:
        if self.period < 60:
            return f"{self.calls} per {self.period:g} s"
        whole_minutes = self.period % 60 == 0
        return f"{self.calls} per {about(self.period) if whole_minutes else span(self.period)}"


DEFAULT_LIMIT = GenerationPace(calls=10, period=600.0)


def parse_limit(text: str) -> GenerationPace:
    """``"10/600"`` (calls per seconds) -> ``GenerationPace(10, 600.0)``."""
    calls, sep, period = text.partition("/")
    try:
        pace = GenerationPace(calls=int(calls), period=float(period))
    except ValueError:
        pace = None
    if not sep or pace is None or pace.calls < 1 or not pace.period > 0:
        raise UsageError(
            f"--generation-limit takes CALLS/SECONDS, e.g. 10/600 (the service's limit), "
            f"not {text!r}"
        )
    return pace


def slots(taken: Iterable[float], count: int, now: float, limit: GenerationPace) -> list[float]:
    """The earliest start times of ``count`` more generations after those ``taken``."""
    window = sorted(t for t in taken if t > now - limit.period)
    planned: list[float] = []
    for _ in range(count):
        at = now if len(window) < limit.calls else max(now, window[-limit.calls] + limit.period)
        window.append(at)
        planned.append(at)
    return planned


def least_time(taken: Iterable[float], count: int, now: float, limit: GenerationPace) -> float:
    """The least time from ``now`` until ``count`` more generations have started."""
    planned = slots(taken, count, now, limit)
    return planned[-1] - now if planned else 0.0


def span(seconds: float) -> str:
    """A duration to the second: ``12 s``, ``3 m 12 s``, ``2 h 05 m``."""
    whole = max(0, math.ceil(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} m {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} m"


def about(seconds: float) -> str:
    """A duration in round minutes: ``under a minute``, ``45 min``, ``8 h 20 min``."""
    minutes = math.ceil(max(0.0, seconds) / 60)
    if minutes <= 1:
        return "under a minute" if seconds < 60 else "1 min"
    if minutes < 60:
        return f"{minutes} min"
    hours, rest = divmod(minutes, 60)
    return f"{hours} h {rest} min" if rest else f"{hours} h"


def roughly(seconds: float) -> str:
    """``about 45 min``, or ``under a minute``."""
    return "under a minute" if seconds < 60 else f"about {about(seconds)}"


def waiting_message(now: float, next_at: float, left: int, last_at: float) -> str:
    """``waiting for a generation slot: next in 3 m 12 s, 41 left, about 45 min``."""
    return (
        f"waiting for a generation slot: next in {span(next_at - now)}, {left} left, "
        f"{roughly(last_at - now)}"
    )


@attrs.define(kw_only=True)
class Pacer:
    """Hands out generation slots in arrival order, at the pace of ``limit``.

    ``taken``: slots taken before (from the journal).  ``left``: the generations this run still
    has to start.  ``on_taken(at)`` is called with each slot once its request is answered;
    ``on_wait`` gets the waiting message (``first`` is true once per wait, then it comes every
    second while the wait lasts).
    """

    limit: GenerationPace
    taken: list[float] = attrs.Factory(list)
    left: int = 0
    on_taken: Callable[[float], None]
    on_wait: Callable[[str, bool], None]
    clock: Callable[[], float] = time.time
    _lock: asyncio.Lock = attrs.field(factory=asyncio.Lock, init=False)

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Wait for the next slot and hold it while the block sends the creation request.

        The slot counts from the end of the block, which is no earlier than the moment the
        service counted the request: the next slot a period later is then never early in the
        service's eyes, however the request's latency varies.
        """
        index = await self._reserve()
        try:
            yield
        finally:
            self.taken[index] = self.clock()
            self.on_taken(self.taken[index])

    async def _reserve(self) -> int:
        async with self._lock:
            first = True
            while True:
                now = self.clock()
                planned = slots(self.taken, max(self.left, 1), now, self.limit)
                if planned[0] <= now:
                    break
                self.on_wait(waiting_message(now, planned[0], self.left, planned[-1]), first)
                first = False
                await asyncio.sleep(min(planned[0] - now, 1.0))
            self.taken.append(now)
            self.left = max(0, self.left - 1)
            return len(self.taken) - 1
