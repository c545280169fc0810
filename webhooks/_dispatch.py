"""One claimed entry, start to finish: fetch-back, the result sink, the handlers, then the verdict.

All succeed: the entry is acked (soon, with others, by the pool's acker), or, for ``atomic=True``
handlers, their writes and the ack are applied in one step (:class:`~webhooks.AtomicInbox`).  One
fails: retry later with exponential backoff, running only the handlers that have not succeeded
yet (within this process); after ``max_attempts`` hand-outs: dead letter.  Each write that
settles the entry is tried again while the store cannot be reached (:mod:`webhooks._settle`),
the entry held meanwhile.  The pool hands the dispatcher three callbacks, so this module never
imports the pool.

The dispatcher is generic over the receiver's event kind; the steps only the service's
``process.completed`` events take (fetch-back, the result sink) are :class:`ServiceSteps`, which
:class:`~webhooks.WebhookReceiver` hands it as its :class:`BeforeHandlers`, typed on
:class:`~asyncsdk.ProcessCompleted`: no event is asked which kind it is.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import Any, Final, Generic, Protocol, TypeVar, cast

import attrs

from asyncsdk import (
    BadRequestError,
    ConfigurationError,
    NotFoundError,
    ProcessCompleted,
    UnprocessableEntityError,
)
from webhooks._cancelling import stopped_from_outside
from webhooks._contract import (
    AtomicInbox,
    DeliveryInfo,
    Inbox,
    InboxEntry,
    ProcessClient,
    ResultSink,
    StoredEvent,
)
from webhooks._errors import InboxUnavailableError
from webhooks._fetchback import (
    Confirmed,
    Forged,
    NotFinished,
    claimed_event,
    confirm,
    confirm_in_order,
)
from webhooks._observability.counters import Metrics
from webhooks._observability.telemetry import NO_RECEIVER_TELEMETRY, ReceiverTelemetry, log_fields
from webhooks._settle import until_stored

__all__ = [
    "AtomicHandler",
    "BeforeHandlers",
    "Dispatcher",
    "Handler",
    "HandlerSpec",
    "RetryPolicy",
    "ServiceSteps",
    "names",
]

logger = logging.getLogger("webhooks")

T = TypeVar("T")
E = TypeVar("E", bound=StoredEvent)

Handler = Callable[[ProcessCompleted], Awaitable[None]]
AtomicHandler = Callable[[ProcessCompleted, Any], Awaitable[None]]
"""``async def handler(event, writes)``: queues its writes on the inbox's buffer (for Redis, a
:class:`~webhooks.RedisWrites`); they are applied together with the ack."""

#: What the API answers about an id it never gave (unknown, or not an id at all): the delivery
#: names nothing of this deployment's, and is dropped as forged rather than retried.  An answer
#: about the request itself (401, 403, 429, 5xx) is retried: the delivery may be genuine.
_UNKNOWN_TO_THE_API: Final = (NotFoundError, BadRequestError, UnprocessableEntityError)

#: The handlers finished for an entry none has finished yet (never added to).
_NONE_DONE: Final[frozenset[int]] = frozenset()

_DONE_LIMIT: Final = 10_000
"""Entries whose succeeded handlers are remembered at most (a retried entry may be finished by
another process, or never come back); past it the oldest are forgotten (at least once)."""


def a_failure(exc: BaseException) -> bool:
    """Whether ``exc`` from a handler, the sink or fetch-back is that step failing (retried,
    then dead-lettered), not the pool stopping its worker."""
    return isinstance(exc, Exception) or not stopped_from_outside()


@attrs.frozen
class HandlerSpec:
    """A registered handler and the events it wants (``wants(event)``; ``None`` means any).

    ``atomic``: ``func`` is an :data:`AtomicHandler` whose writes commit with the ack.
    ``with_info``: ``func`` takes a :class:`~webhooks.DeliveryInfo` last (read from its signature
    at registration).
    """

    func: Callable[..., Awaitable[None]]
    wants: Callable[[Any], bool] | None = None
    atomic: bool = False
    with_info: bool = False

    @property
    def name(self) -> str:
        return getattr(self.func, "__qualname__", repr(self.func))

    def matches(self, event: StoredEvent) -> bool:
        return self.wants is None or self.wants(event)


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


def names(value: str | Iterable[str] | None, what: str) -> frozenset[str] | None:
    if value is None:
        return None
    names = frozenset((value,) if isinstance(value, str) else value)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ConfigurationError(f"{what} must be a non-empty string or a list of them")
    return names


def _info(entry: InboxEntry) -> DeliveryInfo:
    return DeliveryInfo(
        entry_id=entry.id,
        attempt=entry.attempts,
        received_at=entry.received_at,
        last_error=entry.last_error,
    )


def _matching(
    handlers: Collection[HandlerSpec], event: StoredEvent
) -> list[tuple[int, HandlerSpec]]:
    return [(index, spec) for index, spec in enumerate(handlers) if spec.matches(event)]


class BeforeHandlers(Protocol[E]):
    """What the events of one kind take between the claim and the handlers, typed on that kind:
    the event the handlers get, or ``None`` when the step settled the entry itself (through
    ``run``'s ``settle``, ``fail`` and ``dead_letter``)."""

    async def __call__(self, run: Dispatcher[E], entry: InboxEntry, event: E) -> E | None: ...


@attrs.define(kw_only=True, eq=False)
class Dispatcher(Generic[E]):
    """Runs claimed entries; ``ack_soon``, ``settled`` and ``stored`` tell the pool what became
    of them (queued for the acker; finished otherwise; a new entry was stored)."""

    inbox: Inbox
    handlers: list[HandlerSpec]
    metrics: Metrics
    consumer: str
    ack_soon: Callable[[str], None]
    settled: Callable[[], None]
    stored: Callable[[], None]
    handler_timeout: float = 60.0
    retry: RetryPolicy = attrs.field(factory=RetryPolicy)
    before: BeforeHandlers[E] | None = None
    """What the events of the receiver's kind take before their handlers (the service's:
    :class:`ServiceSteps`)."""
    telemetry: ReceiverTelemetry = NO_RECEIVER_TELEMETRY
    _done: dict[str, set[int]] = attrs.field(factory=dict, init=False)
    """Handlers that succeeded, by entry, until the entry is acked (a replayed dead letter skips
    them too); at most ``_DONE_LIMIT`` entries, the oldest forgotten first."""

    def _note_done(self, entry_id: str, index: int) -> None:
        done = self._done.get(entry_id)
        if done is None:
            if len(self._done) >= _DONE_LIMIT:
                del self._done[next(iter(self._done))]  # the oldest noted
            done = self._done[entry_id] = set()
        done.add(index)

    def forget(self, entry_ids: Iterable[str]) -> None:
        """The entries were acked: their handlers need not be remembered any more."""
        for entry_id in entry_ids:
            self._done.pop(entry_id, None)

    async def run(self, entry: InboxEntry) -> None:
        """The steps before the handlers (the service's: fetch-back, the sink), then the
        handlers, for one claimed entry; then ack, retry or park."""
        nested = bool(self.handlers) or self.before is not None
        with self.telemetry.dispatch(entry, nested=nested):
            await self._run(entry)

    async def _run(self, entry: InboxEntry) -> None:
        # Typed as the receiver's kind, which is all it stores.  (An entry of another kind, in an
        # inbox shared with another kind's receiver, fails where it is first read as this kind,
        # before its handlers or in their match, and is retried and dead-lettered.)
        event = cast(E, entry.event)
        if self.before is not None:
            handed_on = await self.before(self, entry, event)
            if handed_on is None:
                return  # settled there
            event = handed_on
        try:
            matching = _matching(self.handlers, event)
        except Exception as exc:  # an entry of another kind than the handlers' (a shared inbox)
            await self.fail(entry, f"no handler can take this event: {exc!r}")
            return
        done = self._done.get(entry.id, _NONE_DONE)
        errors: list[str] = []
        writes: list[Any] = []
        for index, spec in matching:
            if index in done:
                continue
            try:
                with self.telemetry.handler(spec.name, event):
                    async with asyncio.timeout(self.handler_timeout):
                        args: tuple[Any, ...] = (event,)
                        if spec.atomic:
                            # A fresh buffer per handler: a failing handler leaves nothing queued.
                            buffer = self._atomic_inbox().new_writes()
                            args = (event, buffer)
                        if spec.with_info:
                            args = (*args, _info(entry))
                        await spec.func(*args)
            except TimeoutError:
                errors.append(f"{spec.name}: timed out after {self.handler_timeout} s")
            except (Exception, asyncio.CancelledError) as exc:
                if not a_failure(exc):
                    raise  # the pool is stopping: it hands the entry back
                logger.exception(
                    "webhook handler %s failed for %s",
                    spec.name,
                    event.summary,
                    extra=log_fields(event),
                )
                errors.append(f"{spec.name}: {exc!r}")
            else:
                if spec.atomic:
                    writes.append(buffer)  # applied with the ack, so run again on a retry
                else:
                    self._note_done(entry.id, index)
        if errors:
            await self.fail(entry, "; ".join(errors))
            return
        if writes:
            inbox = self._atomic_inbox()
            tries = 0

            async def apply() -> bool:
                nonlocal tries
                tries += 1
                return await inbox.ack_with(entry.id, self.consumer, writes)

            # Tried again while the store cannot be reached: a try whose outcome is unknown
            # either committed (the next finds the entry acked and applies nothing) or did not.
            if not await self.settle(apply, "applying the writes and the ack of", entry):
                if tries > 1:
                    logger.warning(
                        "webhook entry %s: its writes and ack were applied by a try whose answer"
                        " was lost, or the entry was taken over and its writes are left to the"
                        " consumer that holds it; either way they are applied once",
                        entry.id,
                    )
                else:
                    # Our claim lapsed and another consumer has the entry (or finished it): its
                    # run applies the writes, ours are dropped so that they happen once.
                    logger.warning(
                        "webhook entry %s was taken over before its writes were applied; "
                        "they are left to the consumer that holds it",
                        entry.id,
                    )
                self._done.pop(entry.id, None)
                return
            self._done.pop(entry.id, None)
            self.metrics.processed += 1
            self.settled()
            return
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("webhook for %s handled", event.summary, extra=log_fields(event))
        self.ack_soon(entry.id)  # the handlers that succeeded stay noted until the ack is done

    async def settle(self, write: Callable[[], Awaitable[T]], what: str, entry: InboxEntry) -> T:
        """``write()``, tried again while the store cannot be reached; the entry stays held (in
        the pool's running entries, its claim renewed) until it is done."""
        return await until_stored(
            write, f"{what} webhook entry {entry.id}", again=(InboxUnavailableError,)
        )

    def _atomic_inbox(self) -> AtomicInbox:
        if not isinstance(self.inbox, AtomicInbox):  # checked at registration; kept for safety
            raise TypeError(f"{self.inbox!r} cannot apply writes with the ack")
        return self.inbox

    async def fail(self, entry: InboxEntry, error: str) -> None:
        self.metrics.failed += 1
        if entry.attempts >= self.retry.max_attempts:
            await self.dead_letter(entry, error)
            return
        later = functools.partial(
            self.inbox.retry_later, entry.id, error, self.retry.delay(entry.attempts)
        )
        await self.settle(later, "releasing", entry)
        self.metrics.retried += 1

    async def dead_letter(self, entry: InboxEntry, error: str) -> None:
        logger.error(
            "webhook for %s dead-lettered after %d attempt(s): %s",
            entry.event.summary,
            entry.attempts,
            error,
            extra=log_fields(entry.event),
        )
        park = functools.partial(self.inbox.dead_letter, entry.id, error)
        await self.settle(park, "dead-lettering", entry)
        self.metrics.dead_lettered += 1
        self.settled()


@attrs.frozen(kw_only=True)
class ServiceSteps:
    """What the service's ``process.completed`` events take before their handlers: fetch-back
    with ``client`` (the delivery checked against its order, then against its process; handlers
    get the API's answer), then the result sink (``sink.resolve``, under the handler timeout).

    :class:`~webhooks.WebhookReceiver` gives them to its pool, typed on the events they take.
    """

    client: ProcessClient | None = None
    sink: ResultSink | None = None
    fetch_timeout: float = 30.0

    async def __call__(
        self, run: Dispatcher[ProcessCompleted], entry: InboxEntry, event: ProcessCompleted
    ) -> ProcessCompleted | None:
        """The event the handlers get, or ``None`` when the entry was settled here."""
        if self.client is not None:
            delivered = claimed_event(event)
            if delivered is not None:
                await self._confirm_claim(run, entry, delivered)
                return None
            confirmed = await self._fetch_back(run, entry, event)
            if confirmed is None:
                return None
            event = confirmed
        if self.sink is not None:
            try:
                async with asyncio.timeout(run.handler_timeout):
                    await self.sink.resolve(event)
            except (Exception, asyncio.CancelledError) as exc:
                if not a_failure(exc):
                    raise
                await run.fail(entry, f"result sink failed: {exc!r}")
                return None
        return event

    async def _confirm_claim(
        self, run: Dispatcher[ProcessCompleted], entry: InboxEntry, delivered: ProcessCompleted
    ) -> None:
        """Check an unconfirmed delivery against its order, and store what the API confirms
        under the event's own dedup key (a no-op if it is already held); settle the delivery."""
        assert self.client is not None
        try:
            async with asyncio.timeout(self.fetch_timeout):
                order = await self.client.orders.get(delivered.order_id)
        except _UNKNOWN_TO_THE_API as exc:
            verdict: Confirmed | NotFinished | Forged = Forged(
                f"no order {delivered.order_id!r} (the API answered {exc.status})"
            )
        except (Exception, asyncio.CancelledError) as exc:
            if not a_failure(exc):
                raise
            await run.fail(entry, f"fetch-back failed: {exc!r}")
            return
        else:
            verdict = confirm_in_order(delivered, order)
        if isinstance(verdict, Forged):
            await self._drop_forged(run, entry, delivered, verdict.reason)
        elif isinstance(verdict, NotFinished):
            await self._not_finished(run, entry, delivered, verdict)
        else:
            await self._store_confirmed(run, entry, delivered, verdict)

    async def _drop_forged(
        self,
        run: Dispatcher[ProcessCompleted],
        entry: InboxEntry,
        delivered: ProcessCompleted,
        why: str,
    ) -> None:
        """Settle a delivery the API does not confirm: no handler sees it."""
        logger.warning(
            "webhook for process %r dropped as forged: %s",
            delivered.process_id,
            why,
            extra=log_fields(delivered),
        )
        run.metrics.forged += 1
        await run.settle(functools.partial(run.inbox.ack, entry.id), "acking", entry)
        run.settled()

    async def _store_confirmed(
        self,
        run: Dispatcher[ProcessCompleted],
        entry: InboxEntry,
        delivered: ProcessCompleted,
        verdict: Confirmed,
    ) -> None:
        """Store the event the API confirms under its own dedup key (a no-op if it is held
        already; a worker then handles it), and settle the delivery."""
        if verdict.changed:
            logger.warning(
                "webhook for process %r said %r, the API says %r; using the API's answer",
                delivered.process_id,
                delivered.status,
                verdict.event.status,
                extra=log_fields(delivered),
            )
            run.metrics.rewritten += 1
        put = functools.partial(run.inbox.put, verdict.event, entry.raw)
        if await run.settle(put, "storing the confirmed event of", entry):
            run.stored()
        await run.settle(functools.partial(run.inbox.ack, entry.id), "acking", entry)
        run.settled()

    async def _not_finished(
        self,
        run: Dispatcher[ProcessCompleted],
        entry: InboxEntry,
        delivered: ProcessCompleted,
        verdict: NotFinished,
    ) -> None:
        age = time.time() - entry.received_at
        error = f"the API says process {delivered.process_id} is still {verdict.status!r}"
        if age > run.retry.not_finished_max_age:
            await run.dead_letter(entry, error)
        else:
            later = functools.partial(
                run.inbox.retry_later, entry.id, error, run.retry.not_finished_delay
            )
            await run.settle(later, "releasing", entry)
            run.metrics.retried += 1

    async def _fetch_back(
        self, run: Dispatcher[ProcessCompleted], entry: InboxEntry, delivered: ProcessCompleted
    ) -> ProcessCompleted | None:
        """The API's view of the event, or ``None`` when the entry was settled here."""
        assert self.client is not None
        try:
            async with asyncio.timeout(self.fetch_timeout):
                process = await self.client.processes.get(delivered.process_id)
        except _UNKNOWN_TO_THE_API as exc:
            why = f"no process {delivered.process_id!r} (the API answered {exc.status})"
            await self._drop_forged(run, entry, delivered, why)
            return None
        except (Exception, asyncio.CancelledError) as exc:
            if not a_failure(exc):
                raise
            await run.fail(entry, f"fetch-back failed: {exc!r}")
            return None
        verdict = confirm(delivered, process)
        if isinstance(verdict, NotFinished):
            await self._not_finished(run, entry, delivered, verdict)
            return None
        if verdict.changed:
            # The delivery claimed another status than the API's: the API's event is stored
            # under its own dedup key, and handled as an entry of its own.
            await self._store_confirmed(run, entry, delivered, verdict)
            return None
        return verdict.event
