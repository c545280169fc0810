"""Backpressure: the depth of the inbox every receiver on it shares, as the request path reads it.

A receiver answers ``503 queue_full`` only when the *shared* inbox holds ``queue_limit`` unfinished
events or more, whichever process stored or runs them.  Reading the depth on every request would
cost a round trip per delivery, and a count of this process alone (what it stored minus what it
finished) drifts as soon as other processes take entries it stored.  So :class:`SharedDepth`
keeps the last depth the inbox gave (:meth:`~webhooks.Inbox.pending_count`, which counts the
whole shared inbox) plus the events this process stored since.  A delivery the estimate puts
under the limit goes on at once, and starts a read in the background when the last one is
``max_age`` seconds old (one read at a time); one the estimate puts over it waits for a read that
began after it asked (shared by every delivery waiting): a refusal rests on the inbox's own
answer, never on the estimate.  A receiver thus learns of what other processes stored by the
delivery after the next read; past the limit it accepts at most what arrives meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from typing import Final

import attrs

from webhooks._contract import Inbox

__all__ = ["DEPTH_MAX_AGE", "SharedDepth"]

logger = logging.getLogger("webhooks")

DEPTH_MAX_AGE: Final = 0.1
"""Seconds a depth read stays current while under the limit: ten reads a second per receiver."""


@attrs.define(kw_only=True, eq=False)
class SharedDepth:
    """The shared inbox's depth for :class:`~webhooks._intake.Intake`'s backpressure."""

    inbox: Inbox
    timeout: float
    """Seconds a read may take; past it the last depth known stands."""
    max_age: float = DEPTH_MAX_AGE
    _known: int = attrs.field(default=0, init=False)
    """The depth the last read returned."""
    _added: int = attrs.field(default=0, init=False)
    """Events this process stored since the last read began."""
    _read_at: float = attrs.field(default=-math.inf, init=False)
    """Event-loop time at which the last finished read began."""
    _reading: asyncio.Task[None] | None = attrs.field(default=None, init=False)

    @property
    def estimate(self) -> int:
        """The last depth read plus what this process stored since (acks are not subtracted)."""
        return self._known + self._added

    def stored(self) -> None:
        """One more event was stored by this process."""
        self._added += 1

    def under(self, limit: int) -> bool:
        """Whether the estimate puts the shared inbox under ``limit``: then the delivery goes on
        at once, and a read starts in the background if the last one is ``max_age`` old (the
        request never waits for the store twice).  When not, ask :meth:`over`.

        Not a coroutine: the request path takes this branch on every delivery while the inbox
        keeps up (benchmark line: receiver + MemoryInbox, instructions per delivery).
        """
        if self.estimate >= limit:
            return False
        loop = asyncio.get_running_loop()
        if self._reading is None and loop.time() - self._read_at >= self.max_age:
            self._read(loop)
        return True

    async def over(self, limit: int) -> bool:
        """Whether the shared inbox holds ``limit`` unfinished events or more, by the depth of a
        read that began at this call or later (one read serves every caller waiting for it):
        a refusal rests on the inbox's own answer, never on the estimate."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self._read_at < now:
            reading = self._reading if self._reading is not None else self._read(loop)
            await asyncio.shield(reading)
        return self._known >= limit

    def _read(self, loop: asyncio.AbstractEventLoop) -> asyncio.Task[None]:
        self._reading = loop.create_task(self._count(loop.time()), name="webhooks-depth")
        return self._reading

    async def _count(self, began: float) -> None:
        added = self._added
        try:
            async with asyncio.timeout(self.timeout):
                depth = await self.inbox.pending_count()
        except Exception as exc:
            # The store is down or slow: the put that follows answers 503 by itself.
            logger.warning("reading the webhook inbox's depth failed: %r", exc)
        else:
            self._known = depth
            # Events stored while the read ran may be in ``depth`` already: counted twice, they
            # can only make the next delivery wait for a read, never refuse it.
            self._added -= added
        finally:
            self._read_at = began
            self._reading = None

    async def close(self) -> None:
        """Wait for a read under way (the inbox is about to close)."""
        if self._reading is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._reading)
