"""The shared inbox as the receiver's metrics show it: read from the store every few seconds.

Each receiver's own counts (what it holds, what it finished) say nothing of the entries other
nodes stored or hold.  :class:`StoreReading` asks the store itself (``stats()`` of an
:class:`~webhooks.InspectableInbox`: depth, oldest age, dead letters, replays; only
``pending_count()`` of another inbox) every ``READ_EVERY`` seconds while the receiver runs, so
a scrape reads figures at most that old, and pays no round trip itself.  A figure the store has
not given for ``3 * READ_EVERY`` seconds is not reported at all rather than reported stale.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Final

import attrs

from webhooks._cancelling import stopped_from_outside
from webhooks._contract import Inbox, InboxStats, InspectableInbox

__all__ = ["READ_EVERY", "StoreReading"]

logger = logging.getLogger("webhooks")

READ_EVERY: Final = 2.0
"""Seconds between reads of the shared inbox's figures (one ``stats()`` round trip each)."""
_READ_TIMEOUT: Final = 5.0


@attrs.define(kw_only=True, eq=False)
class StoreReading:
    """The last figures the store gave about the whole shared inbox."""

    inbox: Inbox
    every: float = READ_EVERY
    _stats: InboxStats | None = attrs.field(default=None, init=False)
    _read_at: float = attrs.field(default=0.0, init=False)
    """``time.monotonic()`` of the last read that succeeded."""
    _task: asyncio.Task[None] | None = attrs.field(default=None, init=False)

    @property
    def full(self) -> bool:
        """Whether the store gives more than the depth (oldest age, dead letters, replays)."""
        return isinstance(self.inbox, InspectableInbox)

    def current(self) -> InboxStats | None:
        """The figures of the last read, unless older than three reads (``None``)."""
        if self._stats is None or time.monotonic() - self._read_at > 3 * self.every:
            return None
        return self._stats

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._loop(), name="webhooks-store-gauges"
            )

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _read(self) -> None:
        """Read the figures once (what the loop does every ``every`` seconds)."""
        inbox = self.inbox
        async with asyncio.timeout(_READ_TIMEOUT):
            if isinstance(inbox, InspectableInbox):
                stats = await inbox.stats()
            else:
                stats = InboxStats(depth=await inbox.pending_count(), oldest_age=None, dead=0)
        self._stats = stats
        self._read_at = time.monotonic()

    async def _loop(self) -> None:
        failing = False
        while True:
            try:
                await self._read()
            except Exception as exc:
                if not failing:
                    logger.warning(
                        "reading the webhook inbox's figures for metrics failed: %r", exc
                    )
                failing = True
            else:
                failing = False
            # A store's driver may swallow stop()'s cancel, or answer it with an error of its
            # own (as asyncio.timeout on Python 3.11 can): the task still says it is cancelled.
            if stopped_from_outside():
                raise asyncio.CancelledError
            await asyncio.sleep(self.every)
