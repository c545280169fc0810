"""A receiver's life from start to drain: :class:`Lifecycle` starts and stops its worker pool,
answers 503 while it drains, and closes the stores it owns."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import attrs

from asyncsdk import ConfigurationError
from webhooks._backpressure import SharedDepth
from webhooks._contract import Backend, Inbox, RegistrySink, ResultSink
from webhooks._health import Readiness
from webhooks._observability.store_gauges import StoreReading
from webhooks._pool import WorkerPool

__all__ = ["Lifecycle"]

logger = logging.getLogger("webhooks")


@attrs.define(kw_only=True, eq=False)
class Lifecycle:
    """Starts and stops one receiver's pool and closes its stores.

    ``new -> running -> stopping -> stopped``.  While ``stopping`` every delivery is answered 503
    with ``Retry-After`` (another node, or this one restarted, takes it), the workers finish what
    they run within ``drain_timeout`` and hand back what they hold; then the inbox
    (``close_inbox``) and a backend the receiver owns are closed, and :meth:`drained` returns.
    """

    inbox: Inbox
    registry: ResultSink | None
    pool: WorkerPool[Any]
    depth: SharedDepth
    drain_timeout: float
    close_inbox: bool
    backend: Backend | None = None
    """Inbox and registry the receiver owns (built by ``from_redis``/``from_postgres``)."""
    store: StoreReading | None = None
    """The shared inbox's figures for the metrics, read while running (when metrics are on)."""
    readiness: Readiness | None = None
    """The readiness route (with ``health_routes``), whose store check ends with the receiver."""
    state: str = attrs.field(default="new", init=False)
    _stop_task: asyncio.Task[None] | None = attrs.field(default=None, init=False)
    _stopped: asyncio.Event = attrs.field(factory=asyncio.Event, init=False)

    def shutdown_began(self) -> None:
        """The host's ``on_shutdown``: aiohttp has closed its listening sockets and asked its
        idle connections to close; a delivery still arriving on an open one gets 503 with
        ``Retry-After``, and the readiness route 503.  The workers go on until the cleanup
        (:meth:`stop`)."""
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
            logger.error(
                "the webhook inbox %r cannot be reached at start (%s): every delivery is answered"
                " 503 (its sender retries it: nothing is lost) until it can; start the store, or"
                " fix the address the inbox was given",
                self.inbox,
                exc,
            )
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
        if self.readiness is not None:
            self.readiness.stop()
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
