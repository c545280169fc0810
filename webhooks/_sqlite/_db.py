"""The SQLite inbox's database side: its writer thread, schema and SQL statements.

All SQL runs on one dedicated writer thread that owns the connection.  Writes are grouped:
operations that arrive while a transaction is being committed (and, if ``batch_window`` is set,
within that many seconds of the first) share the next transaction, one fsync for all of them,
and each caller awaits the commit of its own batch before its call returns.  The event loop
hands work to the thread through a queue and gets the answers of a whole batch back in one
wake-up.  Each operation is atomic on its own (one statement, or a savepoint around several), so
one failing operation does not undo the others; a failed commit fails them all and claims
nothing.  An operation, once queued, runs whatever becomes of its caller's future.

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
from pathlib import Path
from typing import Any, Final

from webhooks._errors import InboxUnavailableError

__all__ = [
    "ACK_SQL",
    "CLAIM_SQL",
    "DEAD",
    "DEAD_SQL",
    "DONE",
    "PENDING",
    "READ",
    "STATEMENT",
    "STEPS",
    "Op",
    "SQLiteWriter",
]

Op = Callable[[sqlite3.Connection], Any]

READ: Final = 0
"""Runs outside the write transaction, after it commits."""
STATEMENT: Final = 1
"""A write whose only change is one statement (atomic by itself): no savepoint needed."""
STEPS: Final = 2
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
CREATE TABLE IF NOT EXISTS webhook_inbox_counts (name TEXT PRIMARY KEY, n INTEGER NOT NULL);
"""
PENDING: Final = "pending"
DONE: Final = "done"
DEAD: Final = "dead"
_PURGE_EVERY: Final = 1000
CLAIM_SQL: Final = (
    "UPDATE webhook_inbox SET claimed_by = ?, claimed_at = ?, attempts = attempts + 1"
    " WHERE id IN (SELECT id FROM webhook_inbox WHERE state = ? AND due_at <= ?"
    " AND (claimed_by IS NULL OR claimed_at <= ?) ORDER BY due_at, id LIMIT ?)"
    " RETURNING id, event, raw, attempts, last_error, received_at"
)
"""Oldest due first, in the order of the ``(state, due_at)`` index, so that a claim reads about
``limit`` rows and stops (ordering by ``id`` alone sorted every due row: milliseconds per claim
with a backlog of thousands)."""
ACK_SQL: Final = (
    "UPDATE webhook_inbox SET state = ?, finished_at = ?, claimed_by = NULL,"
    " event = X'', raw = X'' WHERE id = ? AND state != ?"
)
"""The row stays (without its bodies) to hold the dedup key for ``dedup_retention``."""
DEAD_SQL: Final = (
    "SELECT id, event, raw, attempts, last_error, received_at FROM webhook_inbox"
    " WHERE state = ? ORDER BY id LIMIT ?"
)


class SQLiteWriter:
    """The connection to one SQLite file and the thread that runs every operation on it."""

    def __init__(
        self, path: Path, *, busy_timeout: float, batch_window: float, dedup_retention: float
    ) -> None:
        self.path = path
        self.batch_window = batch_window
        self.dedup_retention = dedup_retention
        self._busy_timeout = busy_timeout
        self._conn: sqlite3.Connection | None = None
        self._requests: queue.SimpleQueue[_Request] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._closed = False
        self._writes = 0

    # -- the thread side -------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
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
        # The file holds raw bodies with signed result URLs: readable by its owner only, whatever
        # the umask.  SQLite gives the -wal and -shm files the mode of the database file.
        with contextlib.suppress(FileExistsError):
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
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
                if kind == STATEMENT:
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
                    (DONE, time.time() - self.dedup_retention),
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
        writes = [index for index, (_, _, kind) in enumerate(batch) if kind != READ]
        if writes:
            try:
                results = self._run_batch([(batch[i][0], batch[i][2]) for i in writes])
            except BaseException as exc:  # the thread must answer every caller, whatever failed
                results = [(False, exc)] * len(writes)
            for index, outcome in zip(writes, results, strict=True):
                outcomes[index] = outcome
        if len(writes) < len(batch):
            for index, (op, _, kind) in enumerate(batch):
                if kind == READ:
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
                    if self.batch_window and first[2] != READ:
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

    def submit(self, op: Op, kind: int) -> asyncio.Future[Any]:
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

    async def close(self) -> None:
        """Run everything queued, then close the connection and end the thread."""
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
