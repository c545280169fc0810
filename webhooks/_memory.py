"""An inbox in process memory: for tests and throwaway use (a restart forgets everything)."""

from __future__ import annotations

import asyncio
import collections
import itertools
import time
from collections.abc import Callable, Sequence

import attrs

from webhooks._checks import check_consumer, check_limit, require_seconds
from webhooks._contract import (
    DEFAULT_CLAIM_TIMEOUT,
    DEFAULT_DEDUP_RETENTION,
    InboxEntry,
    InboxStats,
    StoredEvent,
)
from webhooks._errors import InboxUnavailableError, UnknownEntryError

__all__ = ["MemoryInbox"]

_PENDING = "pending"
_DEAD = "dead"


@attrs.define
class _Record:
    id: str
    key: tuple[str, ...]
    event: StoredEvent
    raw: bytes
    received_at: float
    state: str = _PENDING
    attempts: int = 0
    last_error: str | None = None
    due_at: float = 0.0
    claimed_by: str | None = None
    claimed_at: float = 0.0

    def entry(self) -> InboxEntry:
        return InboxEntry(
            id=self.id,
            event=self.event,
            raw=self.raw,
            attempts=self.attempts,
            last_error=self.last_error,
            received_at=self.received_at,
        )


@attrs.define(kw_only=True)
class MemoryInbox:
    """The :class:`~webhooks.Inbox` contract kept in a dict; every call is atomic (no awaits)."""

    claim_timeout: float = DEFAULT_CLAIM_TIMEOUT
    dedup_retention: float = DEFAULT_DEDUP_RETENTION
    clock: Callable[[], float] = time.time
    _records: dict[str, _Record] = attrs.field(factory=dict, init=False)
    _keys: dict[tuple[str, ...], float | None] = attrs.field(factory=dict, init=False)
    """dedup key -> expiry time once finished (``None`` while its entry is held)."""
    _expiries: collections.deque[tuple[float, tuple[str, ...]]] = attrs.field(
        factory=collections.deque, init=False
    )
    _ids: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1), init=False)
    _dead: int = attrs.field(default=0, init=False)
    """Records dead-lettered, so that the depth is a subtraction, not a count."""
    _replayed: int = attrs.field(default=0, init=False)
    _closed: bool = attrs.field(default=False, init=False)

    def _open(self) -> None:
        if self._closed:
            raise InboxUnavailableError("the inbox is closed")

    def _forget_expired(self, now: float) -> None:
        while self._expiries and self._expiries[0][0] <= now:
            expiry, key = self._expiries.popleft()
            if self._keys.get(key) == expiry:
                del self._keys[key]

    async def put(self, event: StoredEvent, raw: bytes) -> bool:
        """Store the event once; ``False`` for a duplicate: :meth:`~webhooks.Inbox.put`."""
        return self._put(event, raw)

    def submit_put(self, event: StoredEvent, raw: bytes) -> asyncio.Future[bool]:
        """:meth:`put`, done before this returns (nothing here suspends): a done future."""
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        try:
            answer.set_result(self._put(event, raw))
        except Exception as exc:
            answer.set_exception(exc)
        return answer

    def submit_put_claimed(
        self, event: StoredEvent, raw: bytes, consumer: str
    ) -> asyncio.Future[InboxEntry | None]:
        """:meth:`submit_put`, the new entry handed to ``consumer`` at once (``None``: a
        duplicate)."""
        consumer = check_consumer(consumer)
        answer: asyncio.Future[InboxEntry | None] = asyncio.get_running_loop().create_future()
        try:
            record = self._store(event, raw)
        except Exception as exc:
            answer.set_exception(exc)
            return answer
        if record is not None:
            record.claimed_by = consumer
            record.claimed_at = record.received_at
            record.attempts = 1
        answer.set_result(None if record is None else record.entry())
        return answer

    def _put(self, event: StoredEvent, raw: bytes) -> bool:
        return self._store(event, raw) is not None

    def _store(self, event: StoredEvent, raw: bytes) -> _Record | None:
        self._open()
        now = self.clock()
        self._forget_expired(now)
        key = event.dedup_key
        if key in self._keys:
            return None
        entry_id = str(next(self._ids))
        self._keys[key] = None
        record = _Record(entry_id, key, event, bytes(raw), now, due_at=now)
        self._records[entry_id] = record
        return record

    async def claim_batch(self, consumer: str, limit: int) -> list[InboxEntry]:
        """Claim up to ``limit`` due entries: :meth:`~webhooks.Inbox.claim_batch`."""
        consumer = check_consumer(consumer)
        check_limit(limit)
        self._open()
        now = self.clock()
        out: list[InboxEntry] = []
        for record in self._records.values():
            if len(out) >= limit:
                break
            if record.state != _PENDING or record.due_at > now:
                continue
            if record.claimed_by is not None and now - record.claimed_at < self.claim_timeout:
                continue
            record.claimed_by = consumer
            record.claimed_at = now
            record.attempts += 1
            out.append(record.entry())
        return out

    async def extend(self, consumer: str, entry_ids: Sequence[str]) -> None:
        """Renew the claims ``consumer`` holds on ``entry_ids``: :meth:`~webhooks.Inbox.extend`."""
        self._open()
        now = self.clock()
        for entry_id in entry_ids:
            record = self._records.get(entry_id)
            if record is not None and record.claimed_by == consumer:
                record.claimed_at = now

    async def ack(self, entry_id: str) -> None:
        """Mark the entry finished for good: :meth:`~webhooks.Inbox.ack`."""
        self._open()
        self._finish(entry_id, self.clock() + self.dedup_retention)

    async def ack_many(self, entry_ids: Sequence[str]) -> None:
        """Mark each entry finished for good, in one step: :meth:`~webhooks.Inbox.ack_many`."""
        self._open()
        expiry = self.clock() + self.dedup_retention
        for entry_id in entry_ids:
            self._finish(entry_id, expiry)

    def _finish(self, entry_id: str, expiry: float) -> None:
        record = self._records.pop(entry_id, None)
        if record is not None:
            if record.state == _DEAD:
                self._dead -= 1
            self._keys[record.key] = expiry
            self._expiries.append((expiry, record.key))

    async def retry_later(self, entry_id: str, error: str, delay: float) -> None:
        """Release the entry, due again in ``delay`` s: :meth:`~webhooks.Inbox.retry_later`."""
        delay = require_seconds("delay", delay, zero_ok=True)
        self._open()
        record = self._records.get(entry_id)
        if record is None or record.state != _PENDING:
            return
        record.claimed_by = None
        record.last_error = error
        record.due_at = self.clock() + max(0.0, delay)

    async def dead_letter(self, entry_id: str, error: str) -> None:
        """Park the entry until replayed; record ``error``: :meth:`~webhooks.Inbox.dead_letter`."""
        self._open()
        record = self._records.get(entry_id)
        if record is None:
            return
        if record.state != _DEAD:
            self._dead += 1
        record.state = _DEAD
        record.claimed_by = None
        record.last_error = error

    async def dead_letters(self, limit: int = 1000) -> list[InboxEntry]:
        """The parked entries, oldest first: :meth:`~webhooks.Inbox.dead_letters`."""
        self._open()
        dead = [r.entry() for r in self._records.values() if r.state == _DEAD]
        return dead[:limit]

    async def replay(self, entry_id: str) -> None:
        """Move a dead letter back to pending, attempts reset: :meth:`~webhooks.Inbox.replay`."""
        self._open()
        record = self._records.get(entry_id)
        if record is None or record.state != _DEAD:
            raise UnknownEntryError(f"no dead letter with id {entry_id!r}; list dead_letters()")
        record.state = _PENDING
        self._dead -= 1
        record.attempts = 0
        record.due_at = self.clock()
        self._replayed += 1

    async def purge(self, entry_id: str) -> None:
        """Drop a dead letter for good: :meth:`~webhooks.InspectableInbox.purge`."""
        self._open()
        record = self._records.get(entry_id)
        if record is None or record.state != _DEAD:
            raise UnknownEntryError(f"no dead letter with id {entry_id!r}; list dead_letters()")
        self._finish(entry_id, self.clock() + self.dedup_retention)

    async def stats(self) -> InboxStats:
        """Depth, oldest entry's age, dead letters: :meth:`~webhooks.InspectableInbox.stats`."""
        self._open()
        pending = [r.received_at for r in self._records.values() if r.state == _PENDING]
        return InboxStats(
            depth=len(pending),
            oldest_age=self.clock() - min(pending) if pending else None,
            dead=self._dead,
            replayed=self._replayed,
        )

    async def pending_count(self) -> int:
        """Entries neither acked nor dead-lettered: :meth:`~webhooks.Inbox.pending_count`."""
        self._open()
        return len(self._records) - self._dead

    async def check(self) -> None:
        """Raise ``InboxUnavailableError`` if the store is down: :meth:`~webhooks.Inbox.check`."""
        self._open()

    async def close(self) -> None:
        """Release the inbox's resources; idempotent: :meth:`~webhooks.Inbox.close`."""
        self._closed = True
