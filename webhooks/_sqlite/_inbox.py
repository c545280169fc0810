"""An inbox in one SQLite file: durable, dependency-free, safe for several processes.

Every operation is a function of the connection that the writer thread of ``_db`` runs, grouped
with the others that queue meanwhile into one transaction (one fsync for all of them).  A ``put``
that returned is committed with ``synchronous=FULL``.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from operator import itemgetter
from pathlib import Path

from webhooks._checks import check_consumer, check_limit, require_seconds
from webhooks._codec import claimed_entry, dedup_key_text, encode_event, entry_from_row
from webhooks._contract import (
    DEFAULT_CLAIM_TIMEOUT,
    DEFAULT_DEDUP_RETENTION,
    InboxEntry,
    InboxStats,
    StoredEvent,
)
from webhooks._errors import UnknownEntryError
from webhooks._sqlite import _db as db

__all__ = ["SQLiteInbox"]


class SQLiteInbox:
    """The :class:`~webhooks.Inbox` contract in a SQLite file at ``path``.

    ``claim_timeout``: seconds after which an unextended claim counts as abandoned.
    ``dedup_retention``: seconds a finished event's dedup key is kept (then its row is purged).
    ``batch_window``: seconds to wait for more writes before a transaction starts (default 0:
    the writes that queue while the previous transaction commits are batch enough, and waiting
    only adds latency unless commits are cheap and the CPU is the limit).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        claim_timeout: float = DEFAULT_CLAIM_TIMEOUT,
        dedup_retention: float = DEFAULT_DEDUP_RETENTION,
        batch_window: float = 0.0,
        busy_timeout: float = 5.0,
    ) -> None:
        self.path = Path(path)
        self._claim_timeout = require_seconds("claim_timeout", claim_timeout, zero_ok=False)
        self.dedup_retention = require_seconds("dedup_retention", dedup_retention, zero_ok=False)
        self.batch_window = require_seconds("batch_window", batch_window, zero_ok=True)
        self._db = db.SQLiteWriter(
            self.path,
            busy_timeout=busy_timeout,
            batch_window=self.batch_window,
            dedup_retention=self.dedup_retention,
        )

    def __repr__(self) -> str:
        return f"SQLiteInbox({str(self.path)!r})"

    @property
    def claim_timeout(self) -> float:
        """Seconds until an unextended claim lapses: :attr:`~webhooks.Inbox.claim_timeout`."""
        return self._claim_timeout

    async def put(self, event: StoredEvent, raw: bytes) -> bool:
        """Store the event once; ``False`` for a duplicate: :meth:`~webhooks.Inbox.put`."""
        return bool(await self.submit_put(event, raw))

    def submit_put(self, event: StoredEvent, raw: bytes) -> asyncio.Future[bool]:
        """Queue :meth:`put` and return at once: the future gets its answer after the commit.

        The write goes ahead whatever becomes of the future: cancelling it, or giving up on it
        after a deadline, only drops the answer, so a caller that stops waiting (a client that
        hung up, a timeout) never interrupts or undoes a commit.  Raises
        :class:`~webhooks.InboxUnavailableError` at once if the inbox is closed.
        """
        store = self._store_op(event, raw, None)

        def op(conn: sqlite3.Connection) -> bool:
            return store(conn) is not None

        # One statement writes (the UPDATE runs only when the INSERT changed nothing).
        return self._db.submit(op, db.STATEMENT)

    def submit_put_claimed(
        self, event: StoredEvent, raw: bytes, consumer: str
    ) -> asyncio.Future[InboxEntry | None]:
        """:meth:`submit_put`, the new row stored already claimed by ``consumer``: the future
        gets its entry after the commit (``None``: a duplicate)."""
        store = self._store_op(event, raw, check_consumer(consumer))
        body = bytes(raw)

        def op(conn: sqlite3.Connection) -> InboxEntry | None:
            return claimed_entry(store(conn), event, body)

        return self._db.submit(op, db.STATEMENT)

    def _store_op(
        self, event: StoredEvent, raw: bytes, consumer: str | None
    ) -> Callable[[sqlite3.Connection], tuple[int, float] | None]:
        """The put of ``event`` as a function of the connection: the new row's id and receive
        time, or ``None`` for a duplicate.  With a ``consumer``, the row is stored claimed by it
        (its first hand-out)."""
        key = dedup_key_text(event)
        data = encode_event(event)
        body = bytes(raw)
        attempts = 0 if consumer is None else 1

        def store(conn: sqlite3.Connection) -> tuple[int, float] | None:
            now = time.time()
            claimed_at = None if consumer is None else now
            row = conn.execute(
                "INSERT INTO webhook_inbox (dedup_key, event, raw, state, received_at, due_at,"
                " claimed_by, claimed_at, attempts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (dedup_key) DO NOTHING RETURNING id",
                (key, data, body, db.PENDING, now, now, consumer, claimed_at, attempts),
            ).fetchone()
            if row is None:
                # A finished key past its retention is free again (the purge may not have run).
                row = conn.execute(
                    "UPDATE webhook_inbox SET event = ?, raw = ?, state = ?, attempts = ?,"
                    " last_error = NULL, received_at = ?, due_at = ?, claimed_by = ?,"
                    " claimed_at = ?, finished_at = NULL"
                    " WHERE dedup_key = ? AND state = ? AND finished_at < ? RETURNING id",
                    (
                        *(data, body, db.PENDING, attempts, now, now, consumer, claimed_at),
                        *(key, db.DONE, now - self.dedup_retention),
                    ),
                ).fetchone()
            return None if row is None else (int(row[0]), now)

        return store

    async def claim_batch(self, consumer: str, limit: int) -> list[InboxEntry]:
        """Claim up to ``limit`` due entries: :meth:`~webhooks.Inbox.claim_batch`."""
        consumer = check_consumer(consumer)
        if check_limit(limit) == 0:
            return []

        def op(conn: sqlite3.Connection) -> list[InboxEntry]:
            now = time.time()
            rows = conn.execute(
                db.CLAIM_SQL, (consumer, now, db.PENDING, now, now - self._claim_timeout, limit)
            ).fetchall()
            rows.sort(key=itemgetter(0))
            return [entry_from_row(row) for row in rows]

        result: list[InboxEntry] = await self._db.submit(op, db.STEPS)
        return result

    async def extend(self, consumer: str, entry_ids: Sequence[str]) -> None:
        """Renew the claims ``consumer`` holds on ``entry_ids``: :meth:`~webhooks.Inbox.extend`."""
        ids = [int(i) for i in entry_ids if i.isdigit()]
        if not ids:
            return

        def op(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "UPDATE webhook_inbox SET claimed_at = ? WHERE id = ? AND claimed_by = ?"
                " AND state = ?",
                [(time.time(), i, consumer, db.PENDING) for i in ids],
            )

        await self._db.submit(op, db.STATEMENT)

    async def ack(self, entry_id: str) -> None:
        """Mark the entry finished for good: :meth:`~webhooks.Inbox.ack`."""
        if not entry_id.isdigit():
            return

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(db.ACK_SQL, (db.DONE, time.time(), int(entry_id), db.DONE))

        await self._db.submit(op, db.STATEMENT)

    async def ack_many(self, entry_ids: Sequence[str]) -> None:
        """:meth:`ack` for every id, in one step of the writer thread."""
        ids = [int(i) for i in entry_ids if i.isdigit()]
        if not ids:
            return

        def op(conn: sqlite3.Connection) -> None:
            finished = time.time()
            conn.executemany(db.ACK_SQL, [(db.DONE, finished, i, db.DONE) for i in ids])

        await self._db.submit(op, db.STEPS)  # several statements: a savepoint keeps them one step

    async def retry_later(self, entry_id: str, error: str, delay: float) -> None:
        """Release the entry, due again in ``delay`` s: :meth:`~webhooks.Inbox.retry_later`."""
        delay = require_seconds("delay", delay, zero_ok=True)
        if not entry_id.isdigit():
            return

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE webhook_inbox SET claimed_by = NULL, claimed_at = NULL, last_error = ?,"
                " due_at = ? WHERE id = ? AND state = ?",
                (error, time.time() + max(0.0, delay), int(entry_id), db.PENDING),
            )

        await self._db.submit(op, db.STATEMENT)

    async def dead_letter(self, entry_id: str, error: str) -> None:
        """Park the entry until replayed; record ``error``: :meth:`~webhooks.Inbox.dead_letter`."""
        if not entry_id.isdigit():
            return

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE webhook_inbox SET state = ?, claimed_by = NULL, claimed_at = NULL,"
                " last_error = ?, finished_at = ? WHERE id = ? AND state = ?",
                (db.DEAD, error, time.time(), int(entry_id), db.PENDING),
            )

        await self._db.submit(op, db.STATEMENT)

    async def dead_letters(self, limit: int = 1000) -> list[InboxEntry]:
        """The parked entries, oldest first: :meth:`~webhooks.Inbox.dead_letters`."""

        def op(conn: sqlite3.Connection) -> list[InboxEntry]:
            rows = conn.execute(db.DEAD_SQL, (db.DEAD, limit)).fetchall()
            return [entry_from_row(row) for row in rows]

        entries: list[InboxEntry] = await self._db.submit(op, db.READ)
        return entries

    async def replay(self, entry_id: str) -> None:
        """Move a dead letter back to pending, attempts reset: :meth:`~webhooks.Inbox.replay`."""

        def op(conn: sqlite3.Connection) -> None:
            cur = conn.execute(
                "UPDATE webhook_inbox SET state = ?, attempts = 0, due_at = ?, finished_at = NULL"
                " WHERE id = ? AND state = ?",
                (db.PENDING, time.time(), int(entry_id), db.DEAD),
            )
            if cur.rowcount != 1:
                raise UnknownEntryError(f"no dead letter with id {entry_id!r}; list dead_letters()")
            conn.execute(
                "INSERT INTO webhook_inbox_counts VALUES ('replayed', 1)"
                " ON CONFLICT (name) DO UPDATE SET n = n + 1"
            )

        if not entry_id.isdigit():
            raise UnknownEntryError(f"no dead letter with id {entry_id!r}; list dead_letters()")
        await self._db.submit(op, db.STATEMENT)

    async def purge(self, entry_id: str) -> None:
        """Drop a dead letter for good: :meth:`~webhooks.InspectableInbox.purge`."""

        def op(conn: sqlite3.Connection) -> None:
            cur = conn.execute(
                db.ACK_SQL + " AND state = ?",
                (db.DONE, time.time(), int(entry_id), db.DONE, db.DEAD),
            )
            if cur.rowcount != 1:
                raise UnknownEntryError(f"no dead letter with id {entry_id!r}; list dead_letters()")

        if not entry_id.isdigit():
            raise UnknownEntryError(f"no dead letter with id {entry_id!r}; list dead_letters()")
        await self._db.submit(op, db.STATEMENT)

    async def stats(self) -> InboxStats:
        """Depth, oldest entry's age, dead letters: :meth:`~webhooks.InspectableInbox.stats`."""

        def op(conn: sqlite3.Connection) -> InboxStats:
            depth, oldest = conn.execute(
                "SELECT COUNT(*), MIN(received_at) FROM webhook_inbox WHERE state = ?",
                (db.PENDING,),
            ).fetchone()
            (dead,) = conn.execute(
                "SELECT COUNT(*) FROM webhook_inbox WHERE state = ?", (db.DEAD,)
            ).fetchone()
            (replayed,) = conn.execute(
                "SELECT COALESCE(MAX(n), 0) FROM webhook_inbox_counts WHERE name = 'replayed'"
            ).fetchone()
            age = None if oldest is None else max(0.0, time.time() - float(oldest))
            return InboxStats(
                depth=int(depth), oldest_age=age, dead=int(dead), replayed=int(replayed)
            )

        stats: InboxStats = await self._db.submit(op, db.READ)
        return stats

    async def pending_count(self) -> int:
        """Entries neither acked nor dead-lettered: :meth:`~webhooks.Inbox.pending_count`."""

        def op(conn: sqlite3.Connection) -> int:
            (count,) = conn.execute(
                "SELECT COUNT(*) FROM webhook_inbox WHERE state = ?", (db.PENDING,)
            ).fetchone()
            return int(count)

        pending: int = await self._db.submit(op, db.READ)
        return pending

    async def check(self) -> None:
        """Raise ``InboxUnavailableError`` if the store is down: :meth:`~webhooks.Inbox.check`."""

        def op(conn: sqlite3.Connection) -> None:
            conn.execute("SELECT 1 FROM webhook_inbox LIMIT 1").fetchall()

        await self._db.submit(op, db.READ)

    async def exists(self) -> bool:
        """Whether the file is there, asked without creating it (as every other method does at
        its first use)."""
        return self.path.is_file()

    async def close(self) -> None:
        """Run everything already queued, then close the connection and end the thread."""
        await self._db.close()
