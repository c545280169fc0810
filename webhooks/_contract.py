"""The contracts between the receiver and what it is given: inbox, verifier, client, sink.

The inbox, the events it stores, the result sink and the fetch-back client are protocols; a
verifier's input and the parser's verdicts are plain values.  Nothing here does I/O.  What
operators ask of an inbox (:class:`InspectableInbox`: ``stats()`` and ``purge``, beside the
contract's ``dead_letters`` and ``replay``; ``asyncsdk inbox stats|dead|replay|purge`` runs
them) closes the module.

Inbox contract (every store of :data:`webhooks.stores.STORES`)
==============================================================

An inbox holds accepted events until a worker has finished with them: the service's
``process.completed`` events, or the :class:`~webhooks.WebhookEvent` of any other sender
(:data:`StoredEvent`; an inbox stores either, one receiver's kind in practice).  Each is an
:class:`InboxEvent`: it gives its own dedup key and the fields it is stored as, so an inbox
never asks which of the two it holds.

``put(event, raw)``
    One atomic step that both *claims the dedup key* ``event.dedup_key`` ((event, process_id,
    status) for ``process.completed``, ("webhook", message id) for a generic event) and
    *persists the entry*.  It returns ``True`` for a new event and ``False`` for a
    duplicate of an event already held (pending, in progress, finished or dead-lettered, for as
    long as the backend keeps finished keys: at least ``DEFAULT_DEDUP_RETENTION`` seconds after the
    ack unless configured otherwise).  Concurrent ``put`` calls with the same key return ``True``
    for exactly one of them.  When ``put`` returns, the entry is durable to the backend's standard
    (committed with fsync for SQLite and PostgreSQL; for Redis, the server's persistence, whose
    window a host crash can lose unless the inbox's strict durability waits for the disk or the
    replicas; process memory for :class:`MemoryInbox`), and the HTTP 2xx that follows relies on
    it: within that standard, a crash after the answer loses nothing.  ``put`` never
    half-succeeds: on any exception the key is not claimed and the sender's retry will be
    accepted.  A store that cannot be reached raises
    :class:`InboxUnavailableError` (the receiver treats any other exception the same way).

``submit_put(event, raw)``
    Starts :meth:`Inbox.put` and returns at once a future that gets its answer.  The write goes
    ahead whatever becomes of the future: a caller that cancels it or stops waiting (a client
    that hung up, the receiver's ``put_timeout``) never interrupts or undoes it.  The receiver
    stores every delivery through it.  An inbox whose put never suspends returns a future that
    is done already; one that queues its writes (SQLite's writer thread, Redis' pipeline) returns
    the future of the queued write.  Submitted puts are applied in the order they were submitted:
    of two submissions of one event, the first stores it and the second is its duplicate.

``claim_batch(consumer, limit)``
    Hands out at most ``limit`` entries that are due: not acked, not dead-lettered, whose
    ``retry_later`` delay has passed, and that no consumer holds, where a claim older than the
    inbox's ``claim_timeout`` (seconds since the claim or its last :meth:`Inbox.extend`) counts as
    abandoned.  Entries left unfinished by a crashed process are therefore handed out again after a
    restart: delivery to workers is *at least once*.  Each hand-out increments ``attempts``; the
    entry returned carries the incremented count (1 on the first claim).  Oldest entries first where
    the backend can tell.  An empty list means nothing is due now.

``extend(consumer, entry_ids)``
    Renews the claims ``consumer`` holds, so a slow handler is not handed out a second time.  Ids
    not held by ``consumer`` are ignored.  Workers call it every third of ``claim_timeout``, and
    every half second after a call failed.

``ack(entry_id)``
    The entry is finished.  It is never handed out again; its dedup key stays claimed.  Idempotent:
    the receiver sends an ack that failed, or whose answer was lost, again until it succeeds
    (as it does ``ack_many``, ``retry_later``, ``dead_letter`` and ``ack_with`` while the store
    cannot be reached), holding the entry and renewing its claim meanwhile.

``ack_many(entry_ids)``
    :meth:`Inbox.ack` of each id, in one step where the backend can (one transaction, one
    pipeline; a loop of ``ack`` is enough elsewhere).  Unknown ids are ignored.  The worker pool
    sends the acks of entries that finish close together with it.

``retry_later(entry_id, error, delay)``
    Releases the claim, records ``error`` as ``last_error`` and makes the entry due again ``delay``
    seconds from now (``0`` means at once).  ``attempts`` is kept.  Unknown ids are ignored.

``dead_letter(entry_id, error)``
    Parks the entry: never handed out again until :meth:`Inbox.replay`; listed by
    :meth:`Inbox.dead_letters`; its dedup key stays claimed.  Unknown ids are ignored.

``dead_letters(limit)``
    The parked entries, oldest first, at most ``limit``.

``replay(entry_id)``
    Moves a dead-lettered entry back to pending with ``attempts`` reset to 0 (``last_error`` kept).
    Raises :class:`UnknownEntryError` if ``entry_id`` is not a dead letter.

``pending_count()``
    Entries neither acked nor dead-lettered (due, delayed or in progress), in the *whole* inbox:
    every process's entries, whoever stored or holds them.  It is the receiver's backpressure:
    each receiver reads it at most every 0.1 s while under its ``queue_limit`` and again before
    answering ``503 queue_full`` (one read at a time), so it must be one cheap step (a counter,
    or a count over an index of the unfinished entries; never a scan of finished ones).  It may
    trail writes under way by the time of a round trip.

``check()``
    Cheap round trip to the backing store; raises :class:`InboxUnavailableError` if it is down.

``close()``
    Releases connections and threads.  Idempotent.  Pending entries stay in durable backends.

Put and claim in one step (optional: :class:`ClaimingInbox`, kept by every inbox of the package)
-------------------------------------------------------------------------------------------------

``submit_put_claimed(event, raw, consumer)``
    :meth:`Inbox.submit_put`, and a new entry is handed to ``consumer`` in the same step, as
    ``claim_batch`` would hand it out (claimed, ``attempts`` 1): the future gets that entry, or
    ``None`` for a duplicate.  An inbox that hands out new entries in arrival order only (Redis)
    hands out the oldest entry no consumer has taken yet, which is the new one unless others wait
    before it.  The receiver stores a delivery this way while one of its workers is free, so that
    the event reaches the worker without a claim round trip.  The entry is held from the write
    on: a caller that drops the future leaves it claimed until ``claim_timeout``.

Atomic handler writes (optional: :class:`AtomicInbox`, kept by Redis and PostgreSQL)
------------------------------------------------------------------------------------

``new_writes()``
    An empty, backend-specific buffer of writes (for Redis: :class:`~webhooks.RedisWrites`) that
    handlers registered with ``atomic=True`` fill instead of writing themselves.

``ack_with(entry_id, consumer, writes)``
    One atomic step: *if* ``consumer`` still holds the claim on ``entry_id``, apply the buffers in
    ``writes`` (a sequence of ``new_writes()`` buffers, in order) and ack the entry, and return
    ``True``; otherwise change nothing and return ``False`` (the claim lapsed and another consumer
    has the entry, or it is finished already: a try whose answer was lost and that committed
    makes the next try return ``False``).  A crash before the
    step commits nothing, so the entry is handed out again and the handlers' writes are applied
    once in all, whatever crashes: exactly-once effects on top of at-least-once delivery.

Bad arguments (an empty ``consumer``, a ``limit`` that is not an ``int`` of 0 or more, a ``delay``
that is not a finite number of seconds of 0 or more) raise :class:`~asyncsdk.ConfigurationError`
and change nothing.

Entry ids are opaque strings chosen by the backend.  Events are stored with
:func:`~webhooks._codec.encode_event` and read back with :func:`~webhooks._codec.decode_event`, so
that every backend uses one format.

Result sink
===========

A :class:`ResultSink` (the waiter registry of :mod:`webhooks`) is told about each verified event in
the worker, after verification and fetch-back and before user handlers, so that coroutines awaiting
that process wake up.  A :class:`RegistrySink` also learns whether a receiver is feeding it
(``set_healthy(True)`` at start, ``set_healthy(False)`` at stop) so waiters can fall back to
polling.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol, runtime_checkable

import attrs

from asyncsdk import Order, Process, ProcessCompleted
from webhooks._events import WebhookEvent

__all__ = [
    "DEFAULT_CLAIM_TIMEOUT",
    "DEFAULT_DEDUP_RETENTION",
    "AtomicInbox",
    "Backend",
    "ClaimingInbox",
    "Delivery",
    "DeliveryInfo",
    "Ignored",
    "Inbox",
    "InboxEntry",
    "InboxEvent",
    "InboxStats",
    "InspectableInbox",
    "OrdersAPI",
    "Parsed",
    "ProcessClient",
    "ProcessesAPI",
    "RegistrySink",
    "Rejection",
    "ResultSink",
    "StoredEvent",
    "Verifier",
]

StoredEvent = ProcessCompleted | WebhookEvent
"""What an inbox stores: the service's ``process.completed`` event, or any sender's event.
Each is an :class:`InboxEvent`: the receiver and the inbox ask it what they need to know, never
which of the two it is."""

DEFAULT_CLAIM_TIMEOUT: Final = 60.0
"""Seconds after which an unextended claim counts as abandoned (crashed consumer)."""

DEFAULT_DEDUP_RETENTION: Final = 7 * 24 * 3600.0
"""Seconds a finished event's dedup key is kept after its ack (the sender's retry horizon)."""


class InboxEvent(Protocol):
    """What an inbox and its receiver ask of an event they store: each value answers for itself
    (:class:`~asyncsdk.ProcessCompleted`, :class:`~webhooks.WebhookEvent`)."""

    @property
    def dedup_key(self) -> tuple[str, ...]:
        """The identity of a delivery: the key ``put`` claims."""
        ...

    def storage_fields(self) -> dict[str, object]:
        """The JSON object the inbox stores (:func:`~webhooks._codec.encode_event`)."""
        ...

    def describe(self) -> dict[str, str]:
        """What an operator reads of it, by name, in a new dict (listings; logs and spans take
        part of it)."""
        ...

    @property
    def summary(self) -> str:
        """The event in a log line: ``process p-1 (done)``, ``message msg_1 (invoice.paid)``."""
        ...


@attrs.frozen(kw_only=True)
class InboxEntry:
    """One stored event as the inbox hands it out or lists it."""

    id: str
    """Opaque, backend-chosen id; pass it to ``ack``/``retry_later``/``dead_letter``/``replay``."""
    event: StoredEvent
    """The event as parsed from the delivery (a :class:`~asyncsdk.ProcessCompleted` for the
    service's receiver, a :class:`~webhooks.WebhookEvent` for an :class:`~webhooks.EventReceiver`).
    With fetch-back, the receiver stores it first in its unconfirmed form (its ``event`` is
    ``'["unconfirmed", event, order_id]'``), and a worker then stores the event the API
    confirms, as a new entry."""
    raw: bytes
    """The request body exactly as received."""
    attempts: int = 0
    """Times the entry has been handed out, by ``claim_batch`` or a claimed put (this hand-out
    included)."""
    last_error: str | None = None
    """The error recorded by the last ``retry_later``/``dead_letter``, if any."""
    received_at: float = 0.0
    """Unix time of the ``put``."""


@attrs.frozen(kw_only=True)
class DeliveryInfo:
    """What a handler learns of the hand-out it runs in, when it asks for it (a required
    parameter after the event, or after ``writes`` for ``atomic=True`` handlers)."""

    entry_id: str
    """The inbox entry, as :meth:`Inbox.dead_letters` and :meth:`Inbox.replay` name it."""
    attempt: int
    """1 on the first hand-out, then one more at each: after a handler failed, after a node
    died holding the entry, after a claim lapsed.  Back to 1 after a replay."""
    received_at: float
    """Unix time at which the delivery was stored."""
    last_error: str | None = None
    """Why the previous attempt failed, if one did."""


@runtime_checkable
class Inbox(Protocol):
    """The durable inbox; the module docstring states the contract every backend keeps."""

    @property
    def claim_timeout(self) -> float:
        """Seconds after which a claim that was not extended counts as abandoned."""
        ...

    async def put(self, event: StoredEvent, raw: bytes) -> bool:
        """Atomically claim ``event.dedup_key`` and persist; False for a duplicate."""
        ...

    def submit_put(self, event: StoredEvent, raw: bytes) -> asyncio.Future[bool]:
        """Start :meth:`put`; the future gets its answer, and the write goes ahead regardless."""
        ...

    async def claim_batch(self, consumer: str, limit: int) -> list[InboxEntry]:
        """Hand out up to ``limit`` due entries to ``consumer`` (abandoned claims included)."""
        ...

    async def extend(self, consumer: str, entry_ids: Sequence[str]) -> None:
        """Renew the claims ``consumer`` holds on ``entry_ids``."""
        ...

    async def ack(self, entry_id: str) -> None:
        """Mark the entry finished for good."""
        ...

    async def ack_many(self, entry_ids: Sequence[str]) -> None:
        """:meth:`ack` each id, in one step where the backend can."""
        ...

    async def retry_later(self, entry_id: str, error: str, delay: float) -> None:
        """Release the claim; due again in ``delay`` seconds; record ``error``."""
        ...

    async def dead_letter(self, entry_id: str, error: str) -> None:
        """Park the entry until replayed; record ``error``."""
        ...

    async def dead_letters(self, limit: int = 1000) -> list[InboxEntry]:
        """The parked entries, oldest first."""
        ...

    async def replay(self, entry_id: str) -> None:
        """Move a dead letter back to pending with attempts reset; UnknownEntryError if none."""
        ...

    async def pending_count(self) -> int:
        """Entries neither acked nor dead-lettered, in the whole shared inbox; cheap (read for
        backpressure several times a second)."""
        ...

    async def check(self) -> None:
        """Raise InboxUnavailableError if the backing store is down."""
        ...

    async def close(self) -> None:
        """Release resources; idempotent."""
        ...


@runtime_checkable
class ClaimingInbox(Inbox, Protocol):
    """An inbox that can store an event and hand it out in one step (see the module docstring)."""

    def submit_put_claimed(
        self, event: StoredEvent, raw: bytes, consumer: str
    ) -> asyncio.Future[InboxEntry | None]:
        """Start a put that also hands the new entry to ``consumer``; ``None`` for a duplicate."""
        ...


@runtime_checkable
class AtomicInbox(Inbox, Protocol):
    """An inbox that commits handlers' writes together with the ack (see the module docstring)."""

    def new_writes(self) -> Any:
        """An empty buffer of writes for the handlers of one entry."""
        ...

    async def ack_with(self, entry_id: str, consumer: str, writes: Sequence[Any]) -> bool:
        """Apply the ``writes`` buffers and ack, atomically, if ``consumer`` still holds it."""
        ...


@runtime_checkable
class ResultSink(Protocol):
    """Told about each verified event before user handlers run."""

    async def resolve(self, event: ProcessCompleted) -> None:
        """Take one verified event (the registry wakes the waiters of its process)."""


@runtime_checkable
class RegistrySink(ResultSink, Protocol):
    """A result sink that also tracks whether a receiver feeds it."""

    def set_healthy(self, healthy: bool) -> None:
        """Say whether a running receiver feeds this sink (waiters poll while it does not)."""


class Backend(Protocol):
    """An inbox and a registry on one shared store, closed together."""

    @property
    def inbox(self) -> Inbox:
        """The inbox on the shared store."""

    @property
    def registry(self) -> RegistrySink:
        """The registry on the shared store, fed by the receiver."""

    async def close(self) -> None:
        """Close the inbox and the registry; idempotent."""


# -- fetch-back ---------------------------------------------------------------------------------


class ProcessesAPI(Protocol):
    async def get(self, process_id: str) -> Process: ...


class OrdersAPI(Protocol):
    async def get(self, order_id: str) -> Order: ...


class ProcessClient(Protocol):
    """Anything with ``processes.get(process_id) -> Process`` and ``orders.get(order_id) ->
    Order`` (``asyncsdk.Client`` fits): what fetch-back asks the API."""

    @property
    def processes(self) -> ProcessesAPI:
        """What has ``get(process_id)``: ``client.processes``."""

    @property
    def orders(self) -> OrdersAPI:
        """What has ``get(order_id)``: ``client.orders``."""


# -- verification and parsing: what goes in, what comes out -------------------------------------


@attrs.frozen
class Delivery:
    """What a verifier sees of one request. ``headers`` keys are lower case."""

    headers: Mapping[str, str]
    path_params: Mapping[str, str]
    body: bytes


@attrs.frozen
class Rejection:
    """Refuse the delivery with ``status``; ``code`` is the metrics label, ``reason`` the text,
    ``headers`` what the answer adds (a 415's ``Accept-Encoding``)."""

    status: int
    code: str
    reason: str
    headers: tuple[tuple[str, str], ...] = ()


@attrs.frozen
class Ignored:
    """A valid delivery this receiver does not act on (answered 2xx, counted under ``code``)."""

    code: str
    reason: str


@attrs.frozen
class Parsed:
    event: ProcessCompleted


@runtime_checkable
class Verifier(Protocol):
    """Accept (``None``) or refuse (a :class:`Rejection`, normally 401) one delivery.

    The way to add a signing scheme: any object with ``verify`` and ``path_tokens`` is a
    verifier, for :class:`~webhooks.WebhookReceiver` and :class:`~webhooks.EventReceiver` alike.
    ``verify`` is a plain function of the :class:`Delivery` (lower-case header names, the raw
    body exactly as received): no I/O, and it runs on the request path before the event is
    parsed or stored, so a refused delivery leaves nothing behind.  Compare secrets with
    :func:`hmac.compare_digest`, and keep them out of the reason, which goes back to the sender.
    The cookbook's GitHub recipe (``X-Hub-Signature-256``) is one in a dozen lines.

    ``path_tokens``: the tokens a delivery may carry as the last segment of its path (``()``
    for a verifier that reads no token there); the receiver routes each one's exact URL, where
    ``verify`` is called once, with the body.  When it has path tokens and a request's path
    carries another token (or the receiver is mounted without
    :meth:`~webhooks.WebhookReceiver.setup`), ``verify`` is first called with the body unread
    (``body=b""``), so that a wrong token is refused before the body is read or decompressed:
    its verdict on a token must not depend on the body.
    """

    @property
    def path_tokens(self) -> tuple[str, ...]:
        """The tokens a delivery may carry as the last segment of its path; ``()`` for none."""

    def verify(self, delivery: Delivery) -> Rejection | None:
        """``None`` to accept ``delivery``, or the :class:`Rejection` to answer it with."""


@attrs.frozen(kw_only=True)
class InboxStats:
    """A look at the whole shared inbox."""

    depth: int
    """Unfinished entries: due, delayed or running (what backpressure counts)."""
    oldest_age: float | None
    """Seconds since the oldest unfinished entry was stored; ``None`` when there is none."""
    dead: int
    """Dead letters waiting for a replay or a purge."""
    durability: str | None = None
    """What a crash of the store's host can lose of the deliveries answered 2xx, as read from
    the store's configuration (:class:`~webhooks.RedisInbox`: ``appendonly``/``appendfsync``);
    ``None`` where the backend's promise does not depend on it (see docs/webhooks.md)."""
    lost: int = 0
    """Acknowledged entries whose writes the store was found to have lost, since the inbox was
    first used (:class:`~webhooks.RedisInbox`: its sequence of accepted entries went backwards,
    as a receiver running across a Redis restart found).  Those not handled yet were never
    handled; those handled already lost their dedup keys."""
    last_loss: str | None = None
    """When the last such loss was found, and the sequence's fall; ``None`` when there was none."""
    replayed: int = 0
    """Dead letters replayed so far, by any process or the command line: counted in the store
    since the inbox was made (Redis keeps the count ``retention`` seconds after the last
    replay)."""


@runtime_checkable
class InspectableInbox(Inbox, Protocol):
    """An inbox operators can inspect and clean up.

    ``stats()``
        :class:`InboxStats` of the whole inbox, every process's entries.

    ``purge(entry_id)``
        Drops a dead letter for good: never handed out or listed again; its dedup key stays
        claimed for the inbox's retention, as a finished entry's does, so the sender's retries of
        that event stay duplicates.  :class:`~webhooks.UnknownEntryError` if ``entry_id`` is not
        a dead letter.

    A replay (:meth:`~webhooks.Inbox.replay`) makes a dead letter pending again under the dedup
    claim it has held all along: no second claim, and the event is handled once more, once.  The
    store counts replays (``stats().replayed``), so that each receiver's metrics see those made
    from elsewhere, the command line included.
    """

    async def stats(self) -> InboxStats:
        """Depth, age of the oldest unfinished entry, and dead letters."""
        ...

    async def purge(self, entry_id: str) -> None:
        """Drop a dead letter for good; UnknownEntryError if there is none with that id."""
        ...
