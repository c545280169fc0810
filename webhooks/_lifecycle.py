"""A receiver's life: start, the drain at shutdown, and the closing of what it owns.

``new -> running -> stopping -> stopped``.  While ``stopping`` every delivery is answered 503 with
``Retry-After`` (another node, or this one restarted, takes it), the workers finish what they run
within ``drain_timeout`` and hand back what they hold; then the inbox (``close_inbox``) and a
backend the receiver owns are closed, and :meth:`Lifecycle.drained` returns.
"""

from __future__ import annotations

import asyncio
import logging

import attrs

from asyncsdk import ConfigurationError
from webhooks._backpressure import SharedDepth
from webhooks._contract import Backend, Inbox, RegistrySink, ResultSink
from webhooks._pool import WorkerPool
from webhooks._store_gauges import StoreReading

__all__ = ["Lifecycle"]

logger = logging.getLogger("webhooks")


@attrs.define(kw_only=True, eq=False)
class Lifecycle:
    """Starts and stops one receiver's pool and closes its stores."""

    inbox: Inbox
    registry: ResultSink | None
    pool: WorkerPool
    depth: SharedDepth
    drain_timeout: float
    close_inbox: bool
    backend: Backend | None = None
    """Inbox and registry the receiver owns (built by ``from_redis``/``from_postgres``)."""
    store: StoreReading | None = None
    """The shared inbox's figures for the metrics, read while running (when metrics are on)."""
    state: str = attrs.field(default="new", init=False)
    _stop_task: asyncio.Task[None] | None = attrs.field(default=None, init=False)
    _stopped: asyncio.Event = attrs.field(factory=asyncio.Event, init=False)

    def shutdown_began(self) -> None:
        """The host stopped listening; requests still arriving on open connections get 503."""
        if self.state == "running":
            self.state = "stopping"

    async def start(self) -> None:
        if self.state != "new":
            raise ConfigurationError(f"a receiver starts once; this one is {self.state}")
        try:
            await self.inbox.check()
        except ConfigurationError:
            raise  # a store that cannot keep the inbox's promise (RedisInbox's strict mode)
        except Exception as exc:
            logger.warning("the webhook inbox is unavailable at start (%s); answering 503", exc)
        await self.pool.start()
        if self.store is not None:
            self.store.start()
        self.state = "running"
        if isinstance(self.registry, RegistrySink):
            self.registry.set_healthy(True)

    async def stop(self) -> None:
        if self.state == "new":
            self.state = "stopped"
            await self._close()
            return
        if self._stop_task is None:
            self._stop_task = asyncio.create_task(self._stop(), name="webhooks-stop")
        await asyncio.shield(self._stop_task)

    async def _stop(self) -> None:
        self.state = "stopping"
        if isinstance(self.registry, RegistrySink):
            self.registry.set_healthy(False)
        await self.pool.stop(self.drain_timeout)
        if self.store is not None:
            await self.store.stop()
        self.state = "stopped"
        await self.depth.close()
        await self._close()

    async def _close(self) -> None:
        try:
            if self.close_inbox:
                await self.inbox.close()
            if self.backend is not None:
                await self.backend.close()
        finally:
            self._stopped.set()

    async def drained(self) -> None:
        await self._stopped.wait()
