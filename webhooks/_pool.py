"""The worker pool: takes stored events from the inbox, runs them through handlers, acks them.

``workers`` long-lived worker tasks take claimed entries from a local queue and run them one after
another; one feeder task fills the queue from the inbox: at once for each new event stored here,
when the queue runs low while more entries are known to wait, and at a tick every
``poll_interval`` for delayed retries, claims abandoned by crashed processes and entries stored
by other processes; while the inbox has a backlog, it claims a reserve beyond the free workers
(:class:`ClaimSize`: as many as the workers finish, at their recent pace, during one
claim's round trip).  A worker whose entries never suspend yields to the
event loop every ``BURST`` entries.  A heartbeat task renews the claims of running and queued
entries so that none is handed to a second worker.

A worker hands each entry to the :class:`~webhooks._dispatch.Dispatcher` (fetch-back, the result
sink, the handlers, the verdict).  When all handlers succeed the worker does not wait for the ack
to start its next entry: the :class:`Acker` sends the acks that gather meanwhile
together in one ``ack_many``, and the entries stay held, their claims renewed, until their ack is
done (an ack that fails is sent again, with backoff, until the store takes it or the receiver
stops).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from typing import Final, Generic, TypeVar

import attrs

from webhooks._cancelling import stopped_from_outside
from webhooks._contract import ClaimingInbox, Inbox, InboxEntry, StoredEvent
from webhooks._dispatch import (
    BeforeHandlers,
    Dispatcher,
    HandlerSpec,
    RetryPolicy,
)
from webhooks._errors import InboxUnavailableError
from webhooks._observability.counters import Metrics
from webhooks._observability.telemetry import NO_RECEIVER_TELEMETRY, ReceiverTelemetry
from webhooks._settle import until_stored

__all__ = ["WorkerPool"]

logger = logging.getLogger("webhooks")

E = TypeVar("E", bound=StoredEvent)

_RELEASE_TIMEOUT: Final = 5.0
_RENEW_RETRY: Final = 0.5
"""Seconds between tries of a claim renewal that failed."""
_NOT_STARTED: Final = "the receiver stopped before the entry started"


@attrs.define(kw_only=True, eq=False)
class WorkerPool(Generic[E]):
    """Runs stored events of one kind, ``E``, through what they take before their handlers
    (``before_handlers``: fetch-back and the result sink for the service's events), then the
    handlers."""

    inbox: Inbox
    handlers: list[HandlerSpec]
    metrics: Metrics
    workers: int = 8
    handler_timeout: float = 60.0
    retry: RetryPolicy = attrs.field(factory=RetryPolicy)
    before_handlers: BeforeHandlers[E] | None = None
    poll_interval: float = 1.0
    consumer: str = attrs.field(factory=lambda: f"webhooks-{uuid.uuid4().hex[:12]}")
    telemetry: ReceiverTelemetry = NO_RECEIVER_TELEMETRY

    backlog: int = attrs.field(default=0, init=False)
    """Entries stored but not finished, as this process knows it (refreshed from the inbox)."""
    _running: dict[str, InboxEntry] = attrs.field(factory=dict, init=False)
    _ready: deque[InboxEntry] = attrs.field(factory=deque, init=False)
    """Claimed entries no worker has started yet."""
    _idle: deque[asyncio.Future[None]] = attrs.field(factory=deque, init=False)
    """One future per worker waiting for an entry; the feeder wakes as many as it queued."""
    _wake: asyncio.Event = attrs.field(factory=asyncio.Event, init=False)
    _poll: bool = attrs.field(default=True, init=False)
    """Claim even when no entry is known to wait: at start and at each tick (delayed retries,
    abandoned claims, entries another process stored)."""
    _loops: list[asyncio.Task[None]] = attrs.field(factory=list, init=False)
    _feeder: asyncio.Task[None] | None = attrs.field(default=None, init=False)
    _ticker: asyncio.Task[None] | None = attrs.field(default=None, init=False)
    _heartbeat: asyncio.Task[None] | None = attrs.field(default=None, init=False)
    _stopping: bool = attrs.field(default=False, init=False)
    _renewing: bool = attrs.field(default=False, init=False)
    """The heartbeat renews claims: from :meth:`start` until the entries held at :meth:`stop`
    are finished or handed back."""
    _dispatcher: Dispatcher[E] = attrs.field(init=False)
    _acker: Acker = attrs.field(init=False)
    _size: ClaimSize = attrs.field(init=False)
    _claiming: ClaimingInbox | None = attrs.field(default=None, init=False)
    """The inbox, when it can store an event and hand it to this pool in one step."""
    _claimed_puts: set[asyncio.Future[InboxEntry | None]] = attrs.field(factory=set, init=False)
    """Puts on their way that will hand their entry to this pool."""
    _stopped: bool = attrs.field(default=False, init=False)
    """:meth:`stop` has handed back what it held; a later hand-over goes back at once."""
    _handing_back: set[asyncio.Task[None]] = attrs.field(factory=set, init=False)

    def __attrs_post_init__(self) -> None:
        if isinstance(self.inbox, ClaimingInbox):
            self._claiming = self.inbox
        self._acker = Acker(inbox=self.inbox, acked=self._acked)
        self._size = ClaimSize(self.workers)
        self._dispatcher = Dispatcher(
            inbox=self.inbox,
            handlers=self.handlers,
            metrics=self.metrics,
            consumer=self.consumer,
            ack_soon=self._acker.ack_soon,
            settled=self._settled,
            stored=self.stored,
            handler_timeout=self.handler_timeout,
            retry=self.retry,
            before=self.before_handlers,
            telemetry=self.telemetry,
        )

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        with contextlib.suppress(Exception):
            self.backlog = await self.inbox.pending_count()
        self._stopping = False
        self._renewing = True
        self._loops = [
            asyncio.create_task(self._work(), name=f"webhooks-worker-{n}")
            for n in range(self.workers)
        ]
        self._feeder = asyncio.create_task(self._feed(), name="webhooks-feeder")
        self._ticker = asyncio.create_task(self._tick(), name="webhooks-ticker")
        self._heartbeat = asyncio.create_task(self._beat(), name="webhooks-heartbeat")

    def stored(self) -> None:
        """A new entry was stored: count it, and claim now rather than at the next poll unless
        it was handed to this pool as it was stored."""
        self.backlog += 1
        self._ask_feeder()

    def submit_put(self, event: E, raw: bytes) -> asyncio.Future[bool]:
        """Store a delivery, as :meth:`~webhooks.Inbox.submit_put` does.  While a worker is free
        and the inbox is a :class:`~webhooks.ClaimingInbox`, the put also hands the new entry to
        this pool, which queues it for that worker at once: no claim round trip for an event
        that arrives when the workers keep up (benchmark line: receiver, 128 conns, paced,
        server CPU per request against the hand-written handlers)."""
        inbox = self._claiming
        held = len(self._running) + len(self._ready) + len(self._claimed_puts)
        if inbox is None or self._stopping or held >= self.workers:
            return self.inbox.submit_put(event, raw)
        put = inbox.submit_put_claimed(event, raw, self.consumer)
        answer: asyncio.Future[bool] = put.get_loop().create_future()
        if put.done():
            # Stored already (MemoryInbox): the request goes on without a turn of the event loop
            # (benchmark line: receiver + MemoryInbox, server CPU per request).
            self._put_claimed(answer, put)
            return answer
        self._claimed_puts.add(put)
        put.add_done_callback(functools.partial(self._put_claimed, answer))
        return answer

    def _put_claimed(
        self, answer: asyncio.Future[bool], put: asyncio.Future[InboxEntry | None]
    ) -> None:
        """Queue the entry a put handed to this pool, whatever became of ``answer`` (a caller
        that stopped waiting), and pass the put's answer on."""
        self._claimed_puts.discard(put)
        if put.cancelled():
            if not answer.done():
                answer.set_exception(InboxUnavailableError("the put was cancelled"))
            return
        failure = put.exception()
        if failure is not None:
            if not answer.done():
                answer.set_exception(failure)
            return
        entry = put.result()
        # The answer first: the request counts the new entry (``stored``) before a worker can
        # finish it.
        if not answer.done():
            answer.set_result(entry is not None)
        if entry is not None:
            self._take(entry)

    def _take(self, entry: InboxEntry) -> None:
        """Queue an entry handed to this pool for the next free worker; once stopping, for
        :meth:`stop` to hand back, or, after it, handed back at once."""
        if self._stopped:
            task = asyncio.get_running_loop().create_task(
                self._hand_back(entry, _NOT_STARTED), name="webhooks-hand-back"
            )
            self._handing_back.add(task)
            task.add_done_callback(self._handing_back.discard)
            return
        self._ready.append(entry)
        self._wake_workers(1)

    async def _hand_back(self, entry: InboxEntry, reason: str) -> None:
        """Make an entry due again at once, for any process to take (failing that, its claim
        times out)."""
        with contextlib.suppress(Exception):
            async with asyncio.timeout(_RELEASE_TIMEOUT):
                await self.inbox.retry_later(entry.id, reason, 0.0)

    @property
    def in_flight(self) -> int:
        """Entries this process holds: claimed and waiting, running, or finished and being acked."""
        return len(self._running) + len(self._ready) + len(self._acker.held)

    def oldest_received_at(self) -> float | None:
        """When the oldest entry this process holds (queued or running) was received."""
        held = [entry.received_at for entry in (*self._running.values(), *self._ready)]
        return min(held, default=None)

    async def stop(self, deadline: float) -> None:
        """Stop claiming, hand back queued entries, let running ones finish for ``deadline``
        seconds, and release the rest."""
        self._stopping = True
        # Each loop also ends on ``_stopping`` at its next turn: an inbox call that swallows its
        # cancellation (a store's client library may) returns, and the loop must not go on.
        self._wake.set()
        # The heartbeat goes on renewing the claims of running entries and of acks not done
        # yet until both are over (``_stop_renewing``).
        await _cancelled(self._ticker)
        # A claim on the wire is let finish, and its entries handed back below: cancelled, the
        # store may have claimed them for this process all the same, and they would wait for
        # ``claim_timeout``.  The feeder ends at its next turn (``_stopping``).
        await _ended(self._feeder, _RELEASE_TIMEOUT)
        self._wake_workers(self.workers)  # idle workers see _stopping and end
        await self._release_ready()
        loops, self._loops = self._loops, []
        if not loops:
            await self._stop_renewing()
            return
        started = time.monotonic()
        _, late = await asyncio.wait(loops, timeout=max(0.0, deadline))
        if late:
            logger.warning(
                "%d webhook event(s) still running at shutdown; left in the inbox",
                len(self._running),
            )
            for task in late:
                task.cancel()
            await asyncio.wait(late)
        await self._acker.sent(max(_RELEASE_TIMEOUT, deadline - (time.monotonic() - started)))
        await self._stop_renewing()
        # Puts under way when the receiver stopped hand their entries over: give them back too.
        if self._claimed_puts:
            await asyncio.wait(set(self._claimed_puts), timeout=_RELEASE_TIMEOUT)
        self._stopped = True  # a put done later hands its entry back itself
        await self._release_ready()

    async def _stop_renewing(self) -> None:
        self._renewing = False
        await _cancelled(self._heartbeat)

    async def _release_ready(self) -> None:
        """Hand back the claimed entries no worker started, so any process can take them now."""
        waiting, self._ready = list(self._ready), deque()
        for entry in waiting:
            await self._hand_back(entry, _NOT_STARTED)

    # -- claiming -------------------------------------------------------------------------

    def _unseen(self) -> bool:
        """More unfinished entries than this process holds: some wait in the inbox."""
        return self.backlog > self.in_flight

    def _ask_feeder(self) -> None:
        """Wake the feeder if it has a claim to send: an entry is known to wait, or a tick or a
        full batch asked for one.  Otherwise it would wake only to sleep again, a turn of the
        event loop per event (benchmark line: receiver, 128 conns, paced, server CPU per
        request)."""
        if self._poll or self._unseen():
            self._wake.set()

    async def _feed(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping:
            held = len(self._running) + len(self._ready)
            free = self.workers - held
            # More unfinished entries than this process holds: claim a batch in reserve.
            unseen = self._unseen()
            limit = free + self._size.reserve(unseen)
            # A worker that runs out asks for more, but a claim is sent only when an entry is
            # known to wait (stored here, or counted by the inbox) or at a tick: an idle worker
            # alone would claim nothing, one round trip per event at a steady pace.
            enough_queued = len(self._ready) >= self._size.low_water
            if limit <= 0 or enough_queued or not (unseen or self._poll):
                self._wake.clear()
                await self._wake.wait()
                continue
            self._wake.clear()
            self._poll = False
            started = loop.time()
            try:
                batch = await self.inbox.claim_batch(self.consumer, limit)
            except Exception as exc:
                logger.warning("claiming from the webhook inbox failed (%s); retrying", exc)
                batch = []
            self._size.claim_time = loop.time() - started
            queued = {entry.id for entry in self._ready}
            for entry in batch:
                if entry.id in self._running or entry.id in queued or entry.id in self._acker.held:
                    # Our own claim lapsed (renewal failed) and came back to us: it is held.
                    continue
                self._ready.append(entry)
            if self._ready:
                self._wake_workers(len(self._ready))
            if len(batch) < limit:
                # Nothing more is due: sleep until a new event, a worker or the next tick.
                await self._wake.wait()
            else:
                # A full batch: more may be due than this process counts (stored by another
                # node, handed back, abandoned), so the next worker that runs low claims again.
                self._poll = True

    def _wake_workers(self, count: int) -> None:
        """Wake up to ``count`` idle workers (one per queued entry, not all of them)."""
        idle = self._idle
        while count > 0 and idle:
            waiting = idle.popleft()
            if not waiting.done():
                waiting.set_result(None)
                count -= 1

    async def _tick(self) -> None:
        """Wake the feeder every ``poll_interval`` for delayed retries and abandoned claims."""
        while not self._stopping:
            await asyncio.sleep(self.poll_interval)
            self._poll = True
            self._wake.set()

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        burst = 0
        while not self._stopping:
            if not self._ready:
                self._ask_feeder()  # the queue is empty
                waiting: asyncio.Future[None] = loop.create_future()
                self._idle.append(waiting)
                try:
                    await waiting
                finally:
                    if not waiting.done():  # cancelled while idle
                        waiting.cancel()
                burst = 0
                continue
            entry = self._ready.popleft()
            self._running[entry.id] = entry
            if len(self._ready) < self._size.low_water:
                self._ask_feeder()
            started = loop.time()
            try:
                await self._run(entry)
            finally:
                del self._running[entry.id]
            self._size.finished(loop.time() - started)
            burst += 1
            if burst >= BURST:
                burst = 0
                await asyncio.sleep(0)

    async def _beat(self) -> None:
        """Renew the claims held here every third of ``claim_timeout``, and after a renewal
        failed every ``_RENEW_RETRY`` seconds (or the third, when shorter).  A claim may be a
        third of ``claim_timeout`` old when its store stops answering, so it outlives a store
        that does not answer for less than two thirds of ``claim_timeout`` minus that pause."""
        interval = max(0.05, self.inbox.claim_timeout / 3)
        pause = interval
        failures = 0
        last_count = time.monotonic()
        while self._renewing:
            await asyncio.sleep(pause)
            pause = interval
            held = [*self._running, *(entry.id for entry in self._ready), *self._acker.held]
            if held:
                try:
                    await self.inbox.extend(self.consumer, held)
                except Exception as exc:
                    failures += 1
                    pause = min(interval, _RENEW_RETRY)
                    if failures == 1:
                        logger.warning(
                            "renewing %d webhook inbox claim(s) failed (%r); trying again every"
                            " %.1f s",
                            len(held),
                            exc,
                            pause,
                        )
                    continue
                if failures:
                    logger.warning("webhook inbox claims renewed after %d failure(s)", failures)
                    failures = 0
            if self._stopping:
                continue  # renewing only, for the entries still held while stopping
            if time.monotonic() - last_count >= 10 * self.poll_interval:
                last_count = time.monotonic()
                with contextlib.suppress(Exception):
                    self.backlog = await self.inbox.pending_count()
                    self._ask_feeder()  # another process stored entries: claim before the tick

    # -- one entry ------------------------------------------------------------------------

    async def _run(self, entry: InboxEntry) -> None:
        try:
            await self._dispatcher.run(entry)
        except asyncio.CancelledError:
            if not stopped_from_outside():
                # Raised inside, not a stop (the dispatcher retries a handler's own): the worker
                # carries on; the claim times out and the entry is handed out again.
                logger.exception("webhook entry %s: CancelledError while finishing it", entry.id)
                return
            # Shutdown past its deadline: hand the entry back at once rather than after the
            # claim times out.  The handler will run again (at-least-once).
            await self._hand_back(entry, "the receiver stopped before the handlers finished")
            raise
        except Exception:
            # The inbox, while the entry was settled (the dispatcher settles the errors of the
            # handlers and the sink itself).  The claim times out and the entry is handed out
            # again.
            logger.exception("webhook inbox failed while finishing entry %s", entry.id)

    def _acked(self, ids: Sequence[str]) -> None:
        self.metrics.processed += len(ids)
        self.backlog = max(0, self.backlog - len(ids))
        self._dispatcher.forget(ids)

    def _settled(self) -> None:
        self.backlog = max(0, self.backlog - 1)


async def _ended(task: asyncio.Task[None] | None, timeout: float) -> None:
    """Wait up to ``timeout`` seconds for the task to end, then cancel it."""
    if task is not None:
        await asyncio.wait([task], timeout=timeout)
        await _cancelled(task)


async def _cancelled(*tasks: asyncio.Task[None] | None) -> None:
    """Cancel the tasks and wait until they end."""
    for task in tasks:
        if task is not None:
            task.cancel()
    for task in tasks:
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task


_ACK_GATHER: Final = 0.02
"""Seconds the acker waits for more finished entries before it sends their acks in one go.  At
a steady pace each ack would otherwise be a write of its own (a transaction, a script call); the
entries stay held, their claims renewed, meanwhile.  Benchmark line: receiver, 128 conns, paced,
server CPU per request against the hand-written handler's."""


@attrs.define(kw_only=True, eq=False)
class Acker:
    """Sends the acks of finished entries that gather over ``_ACK_GATHER`` seconds, and while
    the previous ones are on the wire, in one ``ack_many``; ``acked`` learns of each batch done."""

    inbox: Inbox
    acked: Callable[[Sequence[str]], None]
    held: set[str] = attrs.field(factory=set, init=False)
    """Finished entries, held until their ack is done (queued or on the wire)."""
    _to_ack: list[str] = attrs.field(factory=list, init=False)
    """Finished entries whose ack has not been sent yet."""
    _task: asyncio.Task[None] | None = attrs.field(default=None, init=False)

    def ack_soon(self, entry_id: str) -> None:
        """Queue the ack of a finished entry."""
        self._to_ack.append(entry_id)
        self.held.add(entry_id)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._send(), name="webhooks-acker")

    async def sent(self, timeout: float) -> None:
        """Wait for the acks of finished entries; an ack still not done after ``timeout`` (the
        store stalled or down) is left to the claim timeout: the entry is handed out again, and
        its handlers run again (at least once)."""
        task = self._task
        if task is None:
            return
        _, late = await asyncio.wait([task], timeout=timeout)
        if late:
            logger.warning(
                "%d webhook ack(s) not done at shutdown; those events will be handled again",
                len(self.held),
            )
            task.cancel()
            await asyncio.wait(late)

    async def _send(self) -> None:
        try:
            await asyncio.sleep(_ACK_GATHER)
            while self._to_ack:
                ids, self._to_ack = self._to_ack, []
                try:
                    # Every failure is tried again: an ack is idempotent and runs no user code.
                    await until_stored(
                        functools.partial(self.inbox.ack_many, ids),
                        f"acking {len(ids)} webhook event(s)",
                        again=(Exception,),
                    )
                finally:
                    self.held.difference_update(ids)
                self.acked(ids)
        finally:
            self._task = None
            self.held.difference_update(self._to_ack)
            self._to_ack = []


BURST: Final = 16
"""Entries a worker runs back to back without suspending before it yields to the event loop."""
_PACE_WEIGHT: Final = 0.05
"""Weight of the latest entry in the moving average of the time per entry."""


@attrs.define(eq=False)
class ClaimSize:
    """The reserve and the low-water mark of one pool of ``workers``: while the inbox has a
    backlog, at least ``workers`` (slow handlers take no more from other processes than that), at
    most ``workers * BURST`` (what they run in one turn of the event loop)."""

    workers: int
    pace: float = attrs.field(default=0.0, init=False)
    """Seconds a worker spends on an entry, as a moving average (0 until one finishes)."""
    claim_time: float = attrs.field(default=0.0, init=False)
    """Seconds the last claim took, answer included."""
    low_water: int = attrs.field(default=0, init=False)
    """Claimed entries left waiting below which a worker asks the feeder for more."""

    def finished(self, took: float) -> None:
        """A worker finished an entry in ``took`` seconds."""
        self.pace = took if self.pace <= 0.0 else self.pace + (took - self.pace) * _PACE_WEIGHT

    def reserve(self, backlog: bool) -> int:
        """Entries to claim beyond the free workers (none without a ``backlog``); sets the
        low-water mark to half of it, at least ``workers``."""
        reserve = 0
        if backlog:
            reserve = self.workers
            if self.pace > 0.0:
                wanted = int(self.workers * self.claim_time / self.pace)
                reserve = max(self.workers, min(wanted, self.workers * BURST))
        self.low_water = max(self.workers, reserve // 2)
        return reserve
