"""The storage contracts of the receiver: the durable inbox and the result sink.

Inbox contract (every backend: :class:`MemoryInbox`, :class:`SQLiteInbox`, the Redis Streams one)
====================================================================================================

An inbox holds accepted ``process.completed`` events until a worker has finished with them.

``put(event, raw)``
    One atomic step that both *claims the dedup key* ``event.dedup_key`` (event, process_id,
    status) and *persists the entry*.  It returns ``True`` for a new event and ``False`` for a
    duplicate of an event already held (pending, in progress, finished or dead-lettered, for as
    long as the backend keeps finished keys: at least ``DEFAULT_DEDUP_RETENTION`` seconds after the
    ack unless configured otherwise).  Concurrent ``put`` calls with the same key return ``True``
    for exactly one of them.  When ``put`` returns, the entry is durable to the backend's standard
    (committed with fsync for SQLite, the server's persistence for Redis, process memory for
    :class:`MemoryInbox`), so the HTTP 2xx that follows can be relied on: a crash after the answer
    loses nothing.  ``put`` never half-succeeds: on any exception the key is not claimed and the
    sender's retry will be accepted.  A store that cannot be reached raises
    :class:`InboxUnavailableError` (the receiver treats any other exception the same way).

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
    not held by ``consumer`` are ignored.  Workers call it well within ``claim_timeout``.

``ack(entry_id)``
    The entry is finished.  It is never handed out again; its dedup key stays claimed.  Idempotent.

``ack_many(entry_ids)`` (optional)
    :meth:`Inbox.ack` of each id, in one step where the backend can (one transaction, one
    pipeline).  Unknown ids are ignored.  The worker pool uses it, where an inbox has it, to send
    the acks of entries that finish close together at once.

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
    Entries neither acked nor dead-lettered (due, delayed or in progress).  Used for backpressure;
    it may be slightly stale.

``check()``
    Cheap round trip to the backing store; raises :class:`InboxUnavailableError` if it is down.

``close()``
    Releases connections and threads.  Idempotent.  Pending entries stay in durable backends.

Atomic handler writes (optional: :class:`AtomicInbox`, kept by :class:`RedisInbox`)
----------------------------------------------------------------------------------

``new_writes()``
    An empty, backend-specific buffer of writes (for Redis: :class:`~webhooks.RedisWrites`) that
    handlers registered with ``atomic=True`` fill instead of writing themselves.

``ack_with(entry_id, consumer, writes)``
    One atomic step: *if* ``consumer`` still holds the claim on ``entry_id``, apply the buffers in
    ``writes`` (a sequence of ``new_writes()`` buffers, in order) and ack the entry, and return
    ``True``; otherwise change nothing and return ``False`` (the claim lapsed and another consumer
    has the entry, or it is finished already).  A crash before the
    step commits nothing, so the entry is handed out again and the handlers' writes are applied
    once in all, whatever crashes: exactly-once effects on top of at-least-once delivery.

Entry ids are opaque strings chosen by the backend.  Events are stored with :func:`encode_event`
and read back with :func:`decode_event` so that every backend uses one format.

Result sink
===========

A :class:`ResultSink` (the waiter registry of :mod:`webhooks`) is told about each verified event in
the worker, after verification and fetch-back and before user handlers, so that coroutines awaiting
that process wake up.  A :class:`RegistrySink` also learns whether a receiver is feeding it
(``set_healthy(True)`` at start, ``set_healthy(False)`` at stop) so waiters can fall back to
polling.
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Sequence
from typing import Any, Final, Protocol, runtime_checkable

import attrs

from asyncsdk import ProcessCompleted, ResultAsset, structure

__all__ = [
    "DEFAULT_CLAIM_TIMEOUT",
    "DEFAULT_DEDUP_RETENTION",
    "AtomicInbox",
    "Inbox",
    "InboxEntry",
    "InboxError",
    "InboxUnavailableError",
    "KeptEvents",
    "RegistrySink",
    "ResultSink",
    "UnknownEntryError",
    "decode_event",
    "dedup_key_text",
    "encode_event",
]

DEFAULT_CLAIM_TIMEOUT: Final = 60.0
"""Seconds after which an unextended claim counts as abandoned (crashed consumer)."""

DEFAULT_DEDUP_RETENTION: Final = 7 * 24 * 3600.0
"""Seconds a finished event's dedup key is kept after its ack (the sender's retry horizon)."""


class InboxError(Exception):
    """Base of the inbox errors."""


class InboxUnavailableError(InboxError):
    """The backing store cannot be reached; the receiver answers 503 with ``Retry-After``."""


class UnknownEntryError(InboxError, LookupError):
    """No entry with that id in the state the operation needs (e.g. replay of a non-dead letter)."""


@attrs.frozen(kw_only=True)
class InboxEntry:
    """One stored event as the inbox hands it out or lists it."""

    id: str
    """Opaque, backend-chosen id; pass it to ``ack``/``retry_later``/``dead_letter``/``replay``."""
    event: ProcessCompleted
    """The event as parsed from the delivery (before any fetch-back)."""
    raw: bytes
    """The request body exactly as received."""
    attempts: int = 0
    """Times the entry has been handed out by ``claim_batch`` (this hand-out included)."""
    last_error: str | None = None
    """The error recorded by the last ``retry_later``/``dead_letter``, if any."""
    received_at: float = 0.0
    """Unix time of the ``put``."""


@runtime_checkable
class Inbox(Protocol):
    """The durable inbox; the module docstring states the contract every backend keeps."""

    @property
    def claim_timeout(self) -> float:
        """Seconds after which a claim that was not extended counts as abandoned."""
        ...

    async def put(self, event: ProcessCompleted, raw: bytes) -> bool:
        """Atomically claim ``event.dedup_key`` and persist; False for a duplicate."""
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
        """Entries neither acked nor dead-lettered."""
        ...

    async def check(self) -> None:
        """Raise InboxUnavailableError if the backing store is down."""
        ...

    async def close(self) -> None:
        """Release resources; idempotent."""
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

    async def resolve(self, event: ProcessCompleted) -> None: ...


@runtime_checkable
class RegistrySink(ResultSink, Protocol):
    """A result sink that also tracks whether a receiver feeds it."""

    def set_healthy(self, healthy: bool) -> None: ...


class KeptEvents:
    """Events an inbox stored itself, by entry id, for its own claims of them: a claim takes the
    event from here instead of decoding the stored copy (the usual case, since the process that
    stores an event usually claims it).

    Each event is kept with a stamp the stored entry also carries (when it was received); a claim
    uses the kept event only if the entry's stamp matches, so an entry rewritten by anyone since
    is decoded.  At most ``limit`` are kept, the oldest forgotten first.  Not thread-safe: one
    thread (the event loop's, or a backend's own) uses it.
    """

    __slots__ = ("_kept", "limit")

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self._kept: dict[object, tuple[object, ProcessCompleted]] = {}

    def keep(self, entry_id: object, stamp: object, event: ProcessCompleted) -> None:
        kept = self._kept
        kept[entry_id] = (stamp, event)
        if len(kept) > self.limit:
            del kept[next(iter(kept))]

    def take(self, entry_id: object, stamp: object) -> ProcessCompleted | None:
        """The kept event of ``entry_id`` if its stamp is ``stamp`` (forgotten either way)."""
        kept = self._kept.pop(entry_id, None)
        if kept is None or kept[0] != stamp:
            return None
        return kept[1]


_ENCODE: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
"""``json.dumps`` with the storage form's options, built once (``dumps`` builds one per call)."""


_STRING: Final = json.encoder.encode_basestring
"""One JSON string, as ``_ENCODE`` writes it (no ASCII escaping); C, a fraction of a microsecond."""


def dedup_key_text(event: ProcessCompleted) -> str:
    """The dedup key as one unambiguous string (a JSON array), for use as a storage key."""
    try:
        # The same text as _ENCODE(list(key)), several times faster.
        return f"[{_STRING(event.event)},{_STRING(event.process_id)},{_STRING(event.status)}]"
    except TypeError:  # a field that is not a str (built by hand): the general encoder's way
        return _ENCODE(list(event.dedup_key))


_EVENT_FIELDS: Final = ("event", "process_id", "order_id", "tool", "status")
_ASSET_FIELDS: Final = ("asset_id", "src", "thumbnail_src", "asset_type", "asset_role")


def encode_event(event: ProcessCompleted) -> bytes:
    """The storage form of an event (compact JSON, the model's own field names)."""
    try:
        # Written field by field with the C string escaper: the text _encode_event writes, in a
        # third of its time (puts pay it on every event).
        s = _STRING
        assets = ",".join(
            f'{{"asset_id":{s(a.asset_id)},"src":{s(a.src)},"thumbnail_src":{s(a.thumbnail_src)},'
            f'"asset_type":{s(a.asset_type)},"asset_role":{s(a.asset_role)}}}'
            for a in event.final_assets
        )
        return (
            f'{{"event":{s(event.event)},"process_id":{s(event.process_id)},'
            f'"order_id":{s(event.order_id)},"tool":{s(event.tool)},"status":{s(event.status)},'
            f'"final_assets":[{assets}]}}'
        ).encode()
    except TypeError:  # a field that is not a str (built by hand): the general encoder's way
        return _encode_event(event)


def _encode_event(event: ProcessCompleted) -> bytes:
    return _ENCODE(
        {
            "event": event.event,
            "process_id": event.process_id,
            "order_id": event.order_id,
            "tool": event.tool,
            "status": event.status,
            "final_assets": [
                {
                    "asset_id": asset.asset_id,
                    "src": asset.src,
                    "thumbnail_src": asset.thumbnail_src,
                    "asset_type": asset.asset_type,
                    "asset_role": asset.asset_role,
                }
                for asset in event.final_assets
            ],
        }
    ).encode()


def decode_event(data: bytes | str) -> ProcessCompleted:
    """Inverse of :func:`encode_event`."""
    value = json.loads(data)
    try:
        # The form encode_event writes, built directly; anything else goes through the converter.
        if value.keys() == _EVENT_KEYS and all(
            asset.keys() == _ASSET_KEYS for asset in value["final_assets"]
        ):
            return ProcessCompleted(
                **{name: value[name] for name in _EVENT_FIELDS},
                final_assets=tuple(ResultAsset(**asset) for asset in value["final_assets"]),
            )
    except (AttributeError, TypeError):
        pass
    return structure(value, ProcessCompleted)


_EVENT_KEYS: Final = frozenset((*_EVENT_FIELDS, "final_assets"))
_ASSET_KEYS: Final = frozenset(_ASSET_FIELDS)
