"""An inbox in one SQLite file: durable, dependency-free, safe for several processes.

All SQL runs on one dedicated thread that owns the connection.  Writes are grouped: operations
that arrive while a transaction is being committed (or within ``batch_window`` seconds of the
first) share the next transaction, one fsync for all of them, and each caller awaits the commit of
its own batch before its call returns.  Each operation runs in its own savepoint, so one failing
operation does not undo the others; a failed commit fails them all and claims nothing.

The database is in WAL mode with ``synchronous=FULL``: a ``put`` that returned survives a crash of
the process and of the machine.  ``BEGIN IMMEDIATE`` and a busy timeout let several processes
share one file.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

from asyncsdk._errors import ConfigurationError
from asyncsdk._models import ProcessCompleted
from webhooks._store import (
    DEFAULT_CLAIM_TIMEOUT,
    DEFAULT_DEDUP_RETENTION,
    InboxEntry,
    InboxUnavailableError,
    UnknownEntryError,
    decode_event,
    dedup_key_text,
    encode_event,
)

__all__ = ["SQLiteInbox"]

T = TypeVar("T")
Op = Callable[[sqlite3.Connection], Any]

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS webhook_inbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    dedup_key TEXT NOT NULL UNIQUE,
    event BLOB NOT NULL,
    raw BLOB NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    received_at REAL NOT NULL,
    due_at REAL NOT NULL,
    claimed_by TEXT,
    claimed_at REAL,
    finished_at REAL
);
CREATE INDEX IF NOT EXISTS webhook_inbox_due ON webhook_inbox (state, due_at);
CREATE INDEX IF NOT EXISTS webhook_inbox_finished ON webhook_inbox (state, finished_at);
"""
_PENDING: Final = "pending"
_DONE: Final = "done"
_DEAD: Final = "dead"
_PURGE_EVERY: Final = 1000
_CLAIM_SQL: Final = (
    "UPDATE webhook_inbox SET claimed_by = ?, claimed_at = ?, attempts = attempts + 1"
    " WHERE id IN (SELECT id FROM webhook_inbox WHERE state = ? AND due_at <= ?"
    " AND (claimed_by IS NULL OR claimed_at <= ?) ORDER BY id LIMIT ?)"
    " RETURNING id, event, raw, attempts, last_error, received_at"
)
_DEAD_SQL: Final = (
    "SELECT id, event, raw, attempts, last_error, received_at FROM webhook_inbox"
    " WHERE state = ? ORDER BY id LIMIT ?"
)


def _entry(row: tuple[Any, ...]) -> InboxEntry:
    entry_id, event, raw, attempts, last_error, received_at = row
    return InboxEntry(
        id=str(entry_id),
        event=decode_event(event),
        raw=bytes(raw),
        attempts=int(attempts),
        last_error=last_error,
        received_at=float(received_at),
    )


class SQLiteInbox:
    """The :class:`~webhooks.Inbox` contract in a SQLite file at ``path``.

    ``claim_timeout``: seconds after which an unextended claim counts as abandoned.
    ``dedup_retention``: seconds a finished event's dedup key is kept (then its row is purged).
    ``batch_window``: seconds to wait for more writes before a transaction starts.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        claim_timeout: float = DEFAULT_CLAIM_TIMEOUT,
        dedup_retention: float = DEFAULT_DEDUP_RETENTION,
        batch_window: float = 0.001,
        busy_timeout: float = 5.0,
    ) -> None:
        if claim_timeout <= 0 or dedup_retention <= 0 or batch_window < 0:
            raise ConfigurationError(
                "claim_timeout and dedup_retention must be positive and batch_window >= 0"
            )
        self.path = Path(path)
        self._claim_timeout = float(claim_timeout)
        self.dedup_retention = float(dedup_retention)
        self.batch_window = float(batch_window)
        self._busy_timeout = busy_timeout
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None
        self._queue: list[tuple[Op, asyncio.Future[Any]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._closed = False
        self._writes = 0

    def __repr__(self) -> str:
        return f"SQLiteInbox({str(self.path)!r})"

    @property
    def claim_timeout(self) -> float:
        return self._claim_timeout

    # -- the thread side -------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Switching a new file to WAL and creating the schema can meet "database is locked"
            # at once, without the busy handler, while another process does the same: retry
            # within the busy timeout.
            deadline = time.monotonic() + self._busy_timeout
            pause = 0.01
            while True:
                try:
                    self._conn = self._open()
                    break
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                        raise
                    time.sleep(pause)
                    pause = min(pause * 2, 0.25)
        return self._conn

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, timeout=self._busy_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.executescript(_SCHEMA)
        except BaseException:
            conn.close()
            raise
        return conn

    def _run_batch(self, ops: list[Op]) -> list[tuple[bool, Any]]:
        conn = self._connect()
        results: list[tuple[bool, Any]] = []
        conn.execute("BEGIN IMMEDIATE")
        try:
            for op in ops:
                conn.execute("SAVEPOINT op")
                try:
                    value = op(conn)
                except Exception as exc:
                    conn.execute("ROLLBACK TO op")
                    conn.execute("RELEASE op")
                    results.append((False, exc))
                else:
                    conn.execute("RELEASE op")
                    results.append((True, value))
            self._writes += len(ops)
            if self._writes >= _PURGE_EVERY:
                self._writes = 0
                conn.execute(
                    "DELETE FROM webhook_inbox WHERE state = ? AND finished_at < ?",
                    (_DONE, time.time() - self.dedup_retention),
                )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return results

    def _read(self, op: Callable[[sqlite3.Connection], T]) -> T:
        return op(self._connect())

    def _shutdown_thread(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- the asyncio side ------------------------------------------------------------------

    def _ensure_executor(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._closed:
            raise InboxUnavailableError(f"the inbox at {self.path} is closed")
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="webhooks-sqlite"
            )
        return self._executor

    async def _write(self, op: Op) -> Any:
        self._ensure_executor()
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append((op, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush(), name="webhooks-sqlite-flush")
        return await future

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        batch: list[tuple[Op, asyncio.Future[Any]]] = []
        try:
            while self._queue:
                if self.batch_window:
                    await asyncio.sleep(self.batch_window)
                batch, self._queue = self._queue, []
                try:
                    results = await loop.run_in_executor(
                        self._ensure_executor(), self._run_batch, [op for op, _ in batch]
                    )
                except Exception as exc:
                    error = _unavailable(exc, self.path)
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(error)
                    continue
                for (_, future), (ok, value) in zip(batch, results, strict=True):
                    if future.done():
                        continue
                    if ok:
                        future.set_result(value)
                    else:
                        future.set_exception(_unavailable(value, self.path))
                batch = []
        finally:
            # Cancelled (the loop is going away): nobody will run these; do not leave callers
            # waiting forever.  The batch being committed may or may not have landed.
            for _, future in (*batch, *self._queue):
                future.cancel()
            self._queue = []

    async def _run_read(self, op: Callable[[sqlite3.Connection], T]) -> T:
        executor = self._ensure_executor()
        try:
            return await asyncio.get_running_loop().run_in_executor(executor, self._read, op)
        except (sqlite3.Error, OSError) as exc:
            raise _unavailable(exc, self.path) from exc

    # -- the contract ----------------------------------------------------------------------

    async def put(self, event: ProcessCompleted, raw: bytes) -> bool:
        key = dedup_key_text(event)
        data = encode_event(event)
        body = bytes(raw)

        def op(conn: sqlite3.Connection) -> bool:
            now = time.time()
            cur = conn.execute(
                "INSERT INTO webhook_inbox (dedup_key, event, raw, state, received_at, due_at)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (dedup_key) DO NOTHING",
                (key, data, body, _PENDING, now, now),
            )
            if cur.rowcount == 1:
                return True
            # A finished key past its retention is free again (the purge may not have run yet).
            cur = conn.execute(
                "UPDATE webhook_inbox SET event = ?, raw = ?, state = ?, attempts = 0,"
                " last_error = NULL, received_at = ?, due_at = ?, claimed_by = NULL,"
                " claimed_at = NULL, finished_at = NULL"
                " WHERE dedup_key = ? AND state = ? AND finished_at < ?",
                (data, body, _PENDING, now, now, key, _DONE, now - self.dedup_retention),
            )
            return cur.rowcount == 1

        return bool(await self._write(op))

    async def claim_batch(self, consumer: str, limit: int) -> list[InboxEntry]:
        if limit <= 0:
            return []

        def op(conn: sqlite3.Connection) -> list[InboxEntry]:
            now = time.time()
            rows = conn.execute(
                _CLAIM_SQL, (consumer, now, _PENDING, now, now - self._claim_timeout, limit)
            ).fetchall()
            return sorted((_entry(row) for row in rows), key=lambda e: int(e.id))

        result: list[InboxEntry] = await self._write(op)
        return result

    async def extend(self, consumer: str, entry_ids: Sequence[str]) -> None:
        ids = [int(i) for i in entry_ids if i.isdigit()]
        if not ids:
            return

        def op(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "UPDATE webhook_inbox SET claimed_at = ? WHERE id = ? AND claimed_by = ?"
                " AND state = ?",
                [(time.time(), i, consumer, _PENDING) for i in ids],
            )

        await self._write(op)

    async def ack(self, entry_id: str) -> None:
        if not entry_id.isdigit():
            return

        def op(conn: sqlite3.Connection) -> None:
            # The row stays (without its bodies) to hold the dedup key for dedup_retention.
            conn.execute(
                "UPDATE webhook_inbox SET state = ?, finished_at = ?, claimed_by = NULL,"
                " event = X'', raw = X'' WHERE id = ? AND state != ?",
                (_DONE, time.time(), int(entry_id), _DONE),
            )

        await self._write(op)

    async def retry_later(self, entry_id: str, error: str, delay: float) -> None:
        if not entry_id.isdigit():
            return

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE webhook_inbox SET claimed_by = NULL, claimed_at = NULL, last_error = ?,"
                " due_at = ? WHERE id = ? AND state = ?",
                (error, time.time() + max(0.0, delay), int(entry_id), _PENDING),
            )

        await self._write(op)

    async def dead_letter(self, entry_id: str, error: str) -> None:
        if not entry_id.isdigit():
            return

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE webhook_inbox SET state = ?, claimed_by = NULL, claimed_at = NULL,"
                " last_error = ?, finished_at = ? WHERE id = ? AND state = ?",
                (_DEAD, error, time.time(), int(entry_id), _PENDING),
            )

        await self._write(op)

    async def dead_letters(self, limit: int = 1000) -> list[InboxEntry]:
        def op(conn: sqlite3.Connection) -> list[InboxEntry]:
            rows = conn.execute(_DEAD_SQL, (_DEAD, limit)).fetchall()
            return [_entry(row) for row in rows]

        return await self._run_read(op)

    async def replay(self, entry_id: str) -> None:
        def op(conn: sqlite3.Connection) -> None:
            cur = conn.execute(
                "UPDATE webhook_inbox SET state = ?, attempts = 0, due_at = ?, finished_at = NULL"
                " WHERE id = ? AND state = ?",
                (_PENDING, time.time(), int(entry_id), _DEAD),
            )
            if cur.rowcount != 1:
                raise UnknownEntryError(f"no dead letter with id {entry_id!r}; list dead_letters()")

        if not entry_id.isdigit():
            raise UnknownEntryError(f"no dead letter with id {entry_id!r}; list dead_letters()")
        await self._write(op)

    async def pending_count(self) -> int:
        def op(conn: sqlite3.Connection) -> int:
            (count,) = conn.execute(
                "SELECT COUNT(*) FROM webhook_inbox WHERE state = ?", (_PENDING,)
            ).fetchone()
            return int(count)

        return await self._run_read(op)

    async def check(self) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.execute("SELECT 1 FROM webhook_inbox LIMIT 1").fetchall()

        await self._run_read(op)

    async def close(self) -> None:
        if self._closed:
            return
        flusher = self._flusher
        if flusher is not None and not flusher.done():
            await asyncio.wait([flusher])
        self._closed = True
        executor, self._executor = self._executor, None
        if executor is not None:
            await asyncio.get_running_loop().run_in_executor(executor, self._shutdown_thread)
            executor.shutdown(wait=True)


def _unavailable(exc: BaseException, path: Path) -> BaseException:
    if isinstance(exc, InboxUnavailableError):
        return exc
    if isinstance(exc, sqlite3.Error | OSError):
        error = InboxUnavailableError(f"the SQLite inbox at {path} failed: {exc}")
        error.__cause__ = exc
        return error
    return exc
