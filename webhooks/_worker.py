"""The worker pool: takes stored events from the inbox and runs them through handlers.

``workers`` long-lived worker tasks take claimed entries from a local queue and run them one after
another; one feeder task fills the queue from the inbox (woken at once by each new event and
whenever the queue runs low, and by a ticker every ``poll_interval`` for delayed retries and
claims abandoned by crashed processes).  While the inbox has a backlog the feeder claims up to
``workers`` entries beyond the free workers, so that a worker that finishes starts the next entry
at once and claims come in batches; a worker whose entries never suspend yields to the event loop
every ``_BURST`` entries.  A heartbeat task renews the claims of running and queued entries so
that none is handed to a second worker.

For each entry: fetch-back (optional), the result sink, then every matching handler, each under
its own timeout.  All succeed: ack; handlers registered with ``atomic=True`` fill a buffer of
writes instead of writing, and the inbox applies the buffers and the ack in one step
(:class:`~webhooks.AtomicInbox`), so their effects happen once even if the process dies in
between.  One fails: retry later with exponential backoff, running only
the handlers that have not succeeded yet (within this process); after ``max_attempts`` hand-outs:
dead letter.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Collection
from typing import Any, Final

import attrs

from asyncsdk._models import ProcessCompleted
from webhooks._fetchback import NotFinished, ProcessClient, confirm
from webhooks._metrics import Metrics
from webhooks._store import AtomicInbox, Inbox, InboxEntry, ResultSink

__all__ = ["AtomicHandler", "Handler", "HandlerSpec", "RetryPolicy", "WorkerPool"]

logger = logging.getLogger("webhooks")

Handler = Callable[[ProcessCompleted], Awaitable[None]]
AtomicHandler = Callable[[ProcessCompleted, Any], Awaitable[None]]
"""``async def handler(event, writes)``: queues its writes on the inbox's buffer (for Redis, a
:class:`~webhooks.RedisWrites`); they are applied together with the ack."""

_RELEASE_TIMEOUT: Final = 5.0
_BURST: Final = 16
"""Entries a worker runs back to back without suspending before it yields to the event loop."""
#: The handlers finished for an entry none has finished yet (never added to).
_NONE_DONE: Final[frozenset[int]] = frozenset()


@attrs.frozen
class HandlerSpec:
    """A registered handler and the events it wants (``None`` means any).

    ``atomic``: ``func`` is an :data:`AtomicHandler` whose writes commit with the ack.
    """

    func: Handler | AtomicHandler
    statuses: frozenset[str] | None = None
    tools: frozenset[str] | None = None
    atomic: bool = False

    @property
    def name(self) -> str:
        return getattr(self.func, "__qualname__", repr(self.func))

    def matches(self, event: ProcessCompleted) -> bool:
        return (self.statuses is None or event.status in self.statuses) and (
            self.tools is None or event.tool in self.tools
        )


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """Exponential backoff with jitter: ``base * 2**(attempt-1)``, capped at ``cap`` seconds."""

    max_attempts: int = 5
    base: float = 1.0
    cap: float = 300.0
    not_finished_delay: float = 15.0
    """Wait before asking the API again about a process it still calls unfinished."""
    not_finished_max_age: float = 24 * 3600.0
    """Dead-letter an event whose process is still unfinished this long after it was received."""

    def delay(self, attempts: int) -> float:
        raw = min(self.cap, self.base * 2 ** max(0, attempts - 1))
        return float(raw * random.uniform(0.8, 1.0))  # noqa: S311 - jitter, not security


def _matching(
    handlers: Collection[HandlerSpec], event: ProcessCompleted
) -> list[tuple[int, HandlerSpec]]:
    return [(index, spec) for index, spec in enumerate(handlers) if spec.matches(event)]


@attrs.define(kw_only=True, eq=False)
class WorkerPool:
    """Runs stored events through fetch-back, the result sink and the handlers."""

    inbox: Inbox
    handlers: list[HandlerSpec]
    metrics: Metrics
    workers: int = 8
    handler_timeout: float = 60.0
    retry: RetryPolicy = RetryPolicy()
    sink: ResultSink | None = None
    client: ProcessClient | None = None
    fetch_timeout: float = 30.0
    poll_interval: float = 1.0
    consumer: str = attrs.field(factory=lambda: f"webhooks-{uuid.uuid4().hex[:12]}")

    backlog: int = attrs.field(default=0, init=False)
    """Entries stored but not finished, as this process knows it (refreshed from the inbox)."""
    _running: dict[str, InboxEntry] = attrs.field(factory=dict, init=False)
    _ready: deque[InboxEntry] = attrs.field(factory=deque, init=False)
    """Claimed entries no worker has started yet."""
    _has_ready: asyncio.Event = attrs.field(factory=asyncio.Event, init=False)
    _wake: asyncio.Event = attrs.field(factory=asyncio.Event, init=False)
    _loops: list[asyncio.Task[None]] = attrs.field(factory=list, init=False)
    _feeder: asyncio.Task[None] | None = attrs.field(default=None, init=False)
    _ticker: asyncio.Task[None] | None = attrs.field(default=None, init=False)
    _heartbeat: asyncio.Task[None] | None = attrs.field(default=None, init=False)
    _stopping: bool = attrs.field(default=False, init=False)
    _done_handlers: dict[str, set[int]] = attrs.field(factory=dict, init=False)

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        with contextlib.suppress(Exception):
            self.backlog = await self.inbox.pending_count()
        self._stopping = False
        self._loops = [
            asyncio.create_task(self._work(), name=f"webhooks-worker-{n}")
            for n in range(self.workers)
        ]
        self._feeder = asyncio.create_task(self._feed(), name="webhooks-feeder")
        self._ticker = asyncio.create_task(self._tick(), name="webhooks-ticker")
        self._heartbeat = asyncio.create_task(self._beat(), name="webhooks-heartbeat")

    def stored(self) -> None:
        """A new entry was stored: count it and claim now rather than at the next poll."""
        self.backlog += 1
        self._wake.set()

    @property
    def in_flight(self) -> int:
        """Entries this process holds: running, or claimed and waiting for a worker."""
        return len(self._running) + len(self._ready)

    async def stop(self, deadline: float) -> None:
        """Stop claiming, hand back queued entries, let running ones finish for ``deadline``
        seconds, and release the rest."""
        self._stopping = True
        for task in (self._feeder, self._ticker, self._heartbeat):
            if task is not None:
                task.cancel()
        for task in (self._feeder, self._ticker, self._heartbeat):
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._has_ready.set()  # idle workers see _stopping and end
        await self._release_ready()
        loops, self._loops = self._loops, []
        if not loops:
            return
        _, late = await asyncio.wait(loops, timeout=max(0.0, deadline))
        if late:
            logger.warning(
                "%d webhook event(s) still running at shutdown; left in the inbox",
                len(self._running),
            )
            for task in late:
                task.cancel()
            await asyncio.wait(late)

    async def _release_ready(self) -> None:
        """Hand back the claimed entries no worker started, so any process can take them now."""
        waiting, self._ready = list(self._ready), deque()
        for entry in waiting:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(_RELEASE_TIMEOUT):
                    await self.inbox.retry_later(
                        entry.id, "the receiver stopped before the entry started", 0.0
                    )

    # -- claiming -------------------------------------------------------------------------

    async def _feed(self) -> None:
        while not self._stopping:
            held = len(self._running) + len(self._ready)
            free = self.workers - held
            # More unfinished entries than this process holds: claim a batch in reserve.
            limit = free + (self.workers if self.backlog > held else 0)
            if limit <= 0 or len(self._ready) >= self.workers:
                self._wake.clear()
                await self._wake.wait()
                continue
            self._wake.clear()
            try:
                batch = await self.inbox.claim_batch(self.consumer, limit)
            except Exception as exc:
                logger.warning("claiming from the webhook inbox failed (%s); retrying", exc)
                batch = []
            queued = {entry.id for entry in self._ready}
            for entry in batch:
                if entry.id in self._running or entry.id in queued:
                    # Our own claim lapsed (renewal failed) and came back to us: it is held.
                    continue
                self._ready.append(entry)
            if self._ready:
                self._has_ready.set()
            if len(batch) < limit:
                # Nothing more is due: sleep until a new event, a worker or the next tick.
                await self._wake.wait()

    async def _tick(self) -> None:
        """Wake the feeder every ``poll_interval`` for delayed retries and abandoned claims."""
        while True:
            await asyncio.sleep(self.poll_interval)
            self._wake.set()

    async def _work(self) -> None:
        burst = 0
        while not self._stopping:
            if not self._ready:
                self._has_ready.clear()
                self._wake.set()  # the queue is empty: ask the feeder for more
                await self._has_ready.wait()
                burst = 0
                continue
            entry = self._ready.popleft()
            if len(self._ready) < self.workers:
                self._wake.set()
            self._running[entry.id] = entry
            try:
                await self._run(entry)
            finally:
                del self._running[entry.id]
            burst += 1
            if burst >= _BURST:
                burst = 0
                await asyncio.sleep(0)

    async def _beat(self) -> None:
        interval = max(0.05, self.inbox.claim_timeout / 3)
        last_count = time.monotonic()
        while True:
            await asyncio.sleep(interval)
            held = [*self._running, *(entry.id for entry in self._ready)]
            if held:
                try:
                    await self.inbox.extend(self.consumer, held)
                except Exception:
                    logger.exception("renewing webhook inbox claims failed")
            if time.monotonic() - last_count >= 10 * self.poll_interval:
                last_count = time.monotonic()
                with contextlib.suppress(Exception):
                    self.backlog = await self.inbox.pending_count()

    # -- one entry ------------------------------------------------------------------------

    async def _run(self, entry: InboxEntry) -> None:
        try:
            await self._process(entry)
        except asyncio.CancelledError:
            # Shutdown past its deadline: hand the entry back at once rather than after the
            # claim times out.  The handler will run again (at-least-once).
            with contextlib.suppress(Exception):
                async with asyncio.timeout(_RELEASE_TIMEOUT):
                    await self.inbox.retry_later(
                        entry.id, "the receiver stopped before the handlers finished", 0.0
                    )
            raise
        except Exception:
            # Only the inbox itself can land here (handler errors are caught below).  The claim
            # times out and the entry is handed out again.
            logger.exception("webhook inbox failed while finishing entry %s", entry.id)

    async def _process(self, entry: InboxEntry) -> None:
        event = entry.event
        if self.client is not None:
            confirmed = await self._fetch_back(entry)
            if confirmed is None:
                return
            event = confirmed
        if self.sink is not None:
            try:
                async with asyncio.timeout(self.handler_timeout):
                    await self.sink.resolve(event)
            except Exception as exc:
                await self._fail(entry, f"result sink failed: {exc!r}")
                return
        done = self._done_handlers.get(entry.id, _NONE_DONE)
        errors: list[str] = []
        writes: list[Any] = []
        for index, spec in _matching(self.handlers, event):
            if index in done:
                continue
            try:
                async with asyncio.timeout(self.handler_timeout):
                    if spec.atomic:
                        # A fresh buffer per handler: a handler that fails leaves nothing queued.
                        buffer = self._atomic_inbox().new_writes()
                        await spec.func(event, buffer)  # type: ignore[call-arg]
                    else:
                        await spec.func(event)  # type: ignore[call-arg]
            except TimeoutError:
                errors.append(f"{spec.name}: timed out after {self.handler_timeout} s")
            except Exception as exc:
                logger.exception(
                    "webhook handler %s failed for process %s", spec.name, event.process_id
                )
                errors.append(f"{spec.name}: {exc!r}")
            else:
                if spec.atomic:
                    writes.append(buffer)  # applied with the ack, so run again on a retry
                else:
                    self._done_handlers.setdefault(entry.id, set()).add(index)
        if errors:
            await self._fail(entry, "; ".join(errors))
            return
        if writes:
            if not await self._atomic_inbox().ack_with(entry.id, self.consumer, writes):
                # Our claim lapsed and another consumer has the entry (or finished it): its run
                # applies the writes, ours are dropped so that they happen once.
                logger.warning(
                    "webhook entry %s was taken over before its writes were applied; "
                    "they are left to the consumer that holds it",
                    entry.id,
                )
                self._done_handlers.pop(entry.id, None)
                return
        else:
            await self.inbox.ack(entry.id)
        self._done_handlers.pop(entry.id, None)
        self.metrics.processed += 1
        self._settled()

    def _atomic_inbox(self) -> AtomicInbox:
        if not isinstance(self.inbox, AtomicInbox):  # checked at registration; kept for safety
            raise TypeError(f"{self.inbox!r} cannot apply writes with the ack")
        return self.inbox

    async def _fetch_back(self, entry: InboxEntry) -> ProcessCompleted | None:
        """The API's view of the event, or ``None`` when the entry was settled here."""
        assert self.client is not None
        delivered = entry.event
        try:
            async with asyncio.timeout(self.fetch_timeout):
                process = await self.client.processes.get(delivered.process_id)
        except Exception as exc:
            if getattr(exc, "status", None) == 404:
                logger.warning(
                    "webhook for unknown process %r dropped as forged", delivered.process_id
                )
                self.metrics.forged += 1
                await self.inbox.ack(entry.id)
                self._settled()
                return None
            await self._fail(entry, f"fetch-back failed: {exc!r}")
            return None
        verdict = confirm(delivered, process)
        if isinstance(verdict, NotFinished):
            age = time.time() - entry.received_at
            error = f"the API says process {delivered.process_id} is still {verdict.status!r}"
            if age > self.retry.not_finished_max_age:
                await self._dead_letter(entry, error)
            else:
                await self.inbox.retry_later(entry.id, error, self.retry.not_finished_delay)
                self.metrics.retried += 1
            return None
        if verdict.changed:
            # The delivery claimed another status than the API's: store the API's event under its
            # own dedup key (a no-op if it is already held) and settle the delivery.
            logger.warning(
                "webhook for process %r said %r, the API says %r; using the API's answer",
                delivered.process_id,
                delivered.status,
                verdict.event.status,
            )
            self.metrics.rewritten += 1
            if await self.inbox.put(verdict.event, entry.raw):
                self.stored()
            await self.inbox.ack(entry.id)
            self._settled()
            return None
        return verdict.event

    async def _fail(self, entry: InboxEntry, error: str) -> None:
        self.metrics.failed += 1
        if entry.attempts >= self.retry.max_attempts:
            await self._dead_letter(entry, error)
            return
        await self.inbox.retry_later(entry.id, error, self.retry.delay(entry.attempts))
        self.metrics.retried += 1

    async def _dead_letter(self, entry: InboxEntry, error: str) -> None:
        logger.error(
            "webhook event for process %r dead-lettered after %d attempt(s): %s",
            entry.event.process_id,
            entry.attempts,
            error,
        )
        await self.inbox.dead_letter(entry.id, error)
        self.metrics.dead_lettered += 1
        self._settled()

    def _settled(self) -> None:
        self.backlog = max(0, self.backlog - 1)
