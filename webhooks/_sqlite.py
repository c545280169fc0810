"""An inbox in one SQLite file: durable, dependency-free, safe for several processes.

All SQL runs on one dedicated writer thread that owns the connection.  Writes are grouped:
operations that arrive while a transaction is being committed (and, if ``batch_window`` is set,
within that many seconds of the first) share the next transaction, one fsync for all of them,
and each caller awaits the commit of its own batch before its call returns.  The event loop
hands work to the thread through a queue and gets the answers of a whole batch back in one
wake-up.  Each operation is atomic on its own (one statement, or a savepoint around several), so
one failing operation does not undo the others; a failed commit fails them all and claims
nothing.  An operation, once queued, runs whatever becomes of its caller: a caller that is
cancelled or stops waiting never interrupts a commit (see :meth:`SQLiteInbox.submit_put`).

The database is in WAL mode with ``synchronous=FULL``: a ``put`` that returned survives a crash of
the process and of the machine.  ``BEGIN IMMEDIATE`` and a busy timeout let several processes
share one file.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any, Final, TypeVar

from asyncsdk import ConfigurationError, ProcessCompleted
from webhooks._store import (
    DEFAULT_CLAIM_TIMEOUT,
    DEFAULT_DEDUP_RETENTION,
    InboxEntry,
    InboxUnavailableError,
    KeptEvents,
    UnknownEntryError,
    decode_event,
    dedup_key_text,
    encode_event,
)

__all__ = ["SQLiteInbox"]

T = TypeVar("T")
Op = Callable[[sqlite3.Connection], Any]

_READ: Final = 0
"""Runs outside the write transaction, after it commits."""
_STATEMENT: Final = 1
"""A write whose only change is one statement (atomic by itself): no savepoint needed."""
_STEPS: Final = 2
"""A write of several steps: runs in a savepoint of its own."""
_STOP: Final = 3
"""Close the connection and end the writer thread, after everything queued before it."""

_Request = tuple[Op, "asyncio.Future[Any]", int]
_Outcome = tuple[bool, Any]

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
    " AND (claimed_by IS NULL OR claimed_at <= ?) ORDER BY due_at, id LIMIT ?)"
    " RETURNING id, event, raw, attempts, last_error, received_at"
)
"""Oldest due first, in the order of the ``(state, due_at)`` index, so that a claim reads about
``limit`` rows and stops (ordering by ``id`` alone sorted every due row: milliseconds per claim
with a backlog of thousands)."""
_ACK_SQL: Final = (
    "UPDATE webhook_inbox SET state = ?, finished_at = ?, claimed_by = NULL,"
    " event = X'', raw = X'' WHERE id = ? AND state != ?"
)
"""The row stays (without its bodies) to hold the dedup key for ``dedup_retention``."""
_DEAD_SQL: Final = (
    "SELECT id, event, raw, attempts, last_error, received_at FROM webhook_inbox"
    " WHERE state = ? ORDER BY id LIMIT ?"
)


def _entry(row: tuple[Any, ...], known: ProcessCompleted | None = None) -> InboxEntry:
    entry_id, event, raw, attempts, last_error, received_at = row
    return InboxEntry(
        id=str(entry_id),
        event=decode_event(event) if known is None else known,
        raw=bytes(raw),
        attempts=int(attempts),
        last_error=last_error,
        received_at=float(received_at),
    )


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
        if claim_timeout <= 0 or dedup_retention <= 0 or batch_window < 0:
            raise ConfigurationError(
                "claim_timeout and dedup_retention must be positive and batch_window >= 0"
            )
        self.path = Path(path)
        self._claim_timeout = float(claim_timeout)
        self.dedup_retention = float(dedup_retention)
        self.batch_window = float(batch_window)
        self._busy_timeout = busy_timeout
        self._conn: sqlite3.Connection | None = None
        self._requests: queue.SimpleQueue[_Request] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._closed = False
        self._writes = 0
        # By row id, stamped with received_at (a key stored again reuses its row); only the writer
        # thread touches it.
        self._stored = KeptEvents()

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

    def _run_batch(self, ops: Sequence[tuple[Op, int]]) -> list[_Outcome]:
        """One transaction for every write in ``ops``; an outcome per op, in order."""
        conn = self._connect()
        results: list[_Outcome] = []
        conn.execute("BEGIN IMMEDIATE")
        try:
            for op, kind in ops:
                if kind == _STATEMENT:
                    try:
                        value = op(conn)
                    except Exception as exc:
                        if not conn.in_transaction:
                            raise  # the error ended the whole transaction: fail the batch
                        results.append((False, exc))  # SQLite undid the failed statement
                    else:
                        results.append((True, value))
                    continue
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

    def _execute(self, batch: Sequence[_Request]) -> list[_Outcome]:
        """The writes of ``batch`` in one transaction, then its reads; an outcome per request."""
        outcomes: list[_Outcome] = [(False, None)] * len(batch)
        writes = [index for index, (_, _, kind) in enumerate(batch) if kind != _READ]
        if writes:
            try:
                results = self._run_batch([(batch[i][0], batch[i][2]) for i in writes])
            except BaseException as exc:  # the thread must answer every caller, whatever failed
                results = [(False, exc)] * len(writes)
            for index, outcome in zip(writes, results, strict=True):
                outcomes[index] = outcome
        if len(writes) < len(batch):
            for index, (op, _, kind) in enumerate(batch):
                if kind == _READ:
                    try:
                        outcomes[index] = (True, op(self._connect()))
                    except BaseException as exc:
                        outcomes[index] = (False, exc)
        return outcomes

    def _serve(self, requests: queue.SimpleQueue[_Request]) -> None:
        """The writer thread: take everything queued, run it as one batch, answer, repeat."""
        stop: _Request | None = None
        try:
            while stop is None:
                first = requests.get()
                batch: list[_Request] = []
                if first[2] == _STOP:
                    stop = first
                else:
                    if self.batch_window and first[2] != _READ:
                        time.sleep(self.batch_window)
                    batch.append(first)
                    while True:
                        try:
                            item = requests.get_nowait()
                        except queue.Empty:
                            break
                        if item[2] == _STOP:
                            stop = item
                            break
                        batch.append(item)
                if batch:
                    self._answer(batch, self._execute(batch))
        finally:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            if stop is not None:
                self._answer([stop], [(True, None)])

    def _answer(self, batch: Sequence[_Request], outcomes: Sequence[_Outcome]) -> None:
        """Hand a batch's outcomes to the event loop(s) waiting for them: one wake-up per loop."""
        groups: dict[asyncio.AbstractEventLoop, tuple[list[_Request], list[_Outcome]]] = {}
        for request, outcome in zip(batch, outcomes, strict=True):
            requests, answers = groups.setdefault(request[1].get_loop(), ([], []))
            requests.append(request)
            answers.append(outcome)
        for loop, (requests, answers) in groups.items():
            # A closed loop raises RuntimeError: nobody is waiting for those answers any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._settle, requests, answers)

    # -- the asyncio side ------------------------------------------------------------------

    def _settle(self, batch: Sequence[_Request], outcomes: Sequence[_Outcome]) -> None:
        for (_, future, _), (ok, value) in zip(batch, outcomes, strict=True):
            if future.done():
                continue  # its caller stopped waiting; the operation ran all the same
            if ok:
                future.set_result(value)
            else:
                future.set_exception(_unavailable(value, self.path))

    def _submit(self, op: Op, kind: int) -> asyncio.Future[Any]:
        """Queue ``op`` for the writer thread; the future gets its outcome."""
        if self._closed:
            raise InboxUnavailableError(f"the inbox at {self.path} is closed")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._requests.put((op, future, kind))
        if self._writer is None:
            self._writer = threading.Thread(
                target=self._serve, args=(self._requests,), name="webhooks-sqlite", daemon=True
            )
            self._writer.start()
        return future

    async def _write(self, op: Op, kind: int = _STEPS) -> Any:
        return await self._submit(op, kind)

    async def _run_read(self, op: Callable[[sqlite3.Connection], T]) -> T:
        result: T = await self._submit(op, _READ)
        return result

    # -- the contract ----------------------------------------------------------------------

    async def put(self, event: ProcessCompleted, raw: bytes) -> bool:
        return bool(await self.submit_put(event, raw))

    def submit_put(self, event: ProcessCompleted, raw: bytes) -> asyncio.Future[bool]:
        """Queue :meth:`put` and return at once: the future gets its answer after the commit.

        The write goes ahead whatever becomes of the future: cancelling it, or giving up on it
        after a deadline, only drops the answer, so a caller that stops waiting (a client that
        hung up, a timeout) never interrupts or undoes a commit.  Raises
        :class:`~webhooks.InboxUnavailableError` at once if the inbox is closed.
        """
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
                self._stored.keep(cur.lastrowid, now, event)
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

        # One statement writes (the UPDATE runs only when the INSERT changed nothing).
        return self._submit(op, _STATEMENT)

    async def claim_batch(self, consumer: str, limit: int) -> list[InboxEntry]:
        if limit <= 0:
            return []

        def op(conn: sqlite3.Connection) -> list[InboxEntry]:
            now = time.time()
            rows = conn.execute(
                _CLAIM_SQL, (consumer, now, _PENDING, now, now - self._claim_timeout, limit)
            ).fetchall()
            rows.sort(key=itemgetter(0))
            return [_entry(row, self._stored.take(row[0], row[5])) for row in rows]

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

        await self._write(op, _STATEMENT)

    async def ack(self, entry_id: str) -> None:
        if not entry_id.isdigit():
            return

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(_ACK_SQL, (_DONE, time.time(), int(entry_id), _DONE))

        await self._write(op, _STATEMENT)

    async def ack_many(self, entry_ids: Sequence[str]) -> None:
        """:meth:`ack` for every id, in one step of the writer thread."""
        ids = [int(i) for i in entry_ids if i.isdigit()]
        if not ids:
            return

        def op(conn: sqlite3.Connection) -> None:
            finished = time.time()
            conn.executemany(_ACK_SQL, [(_DONE, finished, i, _DONE) for i in ids])

        await self._write(op)  # several statements: a savepoint keeps them one step

    async def retry_later(self, entry_id: str, error: str, delay: float) -> None:
        if not entry_id.isdigit():
            return

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE webhook_inbox SET claimed_by = NULL, claimed_at = NULL, last_error = ?,"
                " due_at = ? WHERE id = ? AND state = ?",
                (error, time.time() + max(0.0, delay), int(entry_id), _PENDING),
            )

        await self._write(op, _STATEMENT)

    async def dead_letter(self, entry_id: str, error: str) -> None:
        if not entry_id.isdigit():
            return

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE webhook_inbox SET state = ?, claimed_by = NULL, claimed_at = NULL,"
                " last_error = ?, finished_at = ? WHERE id = ? AND state = ?",
                (_DEAD, error, time.time(), int(entry_id), _PENDING),
            )

        await self._write(op, _STATEMENT)

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
        await self._write(op, _STATEMENT)

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
        """Run everything already queued, then close the connection and end the thread."""
        if self._closed:
            return
        self._closed = True
        writer, self._writer = self._writer, None
        if writer is None:
            return
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._requests.put((_no_op, done, _STOP))
        await done
        writer.join()


def _no_op(conn: sqlite3.Connection) -> None:
    return None


def _unavailable(exc: BaseException, path: Path) -> BaseException:
    if isinstance(exc, InboxUnavailableError):
        return exc
    if isinstance(exc, sqlite3.Error | OSError):
        error = InboxUnavailableError(f"the SQLite inbox at {path} failed: {exc}")
        error.__cause__ = exc
        return error
    return exc
