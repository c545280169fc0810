"""The SQLite journal of runs: one file the processes of one host share, nothing to install.

Every statement runs on one thread of the journal's own, which owns the connection, so the event
loop never waits on the disk.  The database is in WAL mode with ``synchronous=FULL``: a step
recorded survives a crash of the process and of the machine.  Claims are ``BEGIN IMMEDIATE``
transactions and a busy timeout lets several processes share the file.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final, TypeVar

import attrs

from asyncsdk._checks import require_number
from asyncsdk._errors import ConfigurationError, JournalError
from asyncsdk._journal.contract import (
    Claim,
    RunEntry,
    RunStage,
    made_private,
    recorded,
    stored_ids,
    takeable,
    taken_over,
)

__all__ = ["SQLiteJournal"]

T = TypeVar("T")

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS asyncsdk_runs (
    key TEXT PRIMARY KEY,
    digest TEXT NOT NULL,
    arguments TEXT NOT NULL,
    stage TEXT NOT NULL,
    order_id TEXT NOT NULL DEFAULT '',
    request TEXT NOT NULL DEFAULT '',
    process_ids TEXT NOT NULL DEFAULT '[]',
    result TEXT NOT NULL DEFAULT '',
    owner TEXT NOT NULL DEFAULT '',
    lease_until REAL NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL
)
"""
_COLUMNS: Final = (
    "key, digest, arguments, stage, order_id, request, process_ids, result, owner, "
    "lease_until, updated_at"
)
_SELECT: Final = f"SELECT {_COLUMNS} FROM asyncsdk_runs"


def _entry(journal: SQLiteJournal, row: tuple[Any, ...]) -> RunEntry:
    key, digest, arguments, stage, order_id, request, ids, result, owner, lease, at = row
    return RunEntry(
        key=key,
        digest=digest,
        arguments=arguments,
        stage=stage,
        order_id=order_id,
        request=request,
        process_ids=stored_ids(journal, key, ids),
        result=result,
        owner=owner,
        lease_until=lease,
        updated_at=at,
    )


class SQLiteJournal:
    """A :class:`~asyncsdk.Journal` in one SQLite file (``Client(journal="runs.sqlite3")``).

    ``lease``: the seconds a caller holds a run without renewing it; a run whose caller stopped
    is taken over after that, or at once by a process of the same host (which sees its owner is
    gone).  The file is created ``0600``, and its folder ``0700`` when missing (a folder that
    exists is left as it is).
    """

    def __init__(self, path: str | os.PathLike[str], *, lease: float = 30.0) -> None:
        require_number(
            lease, "lease must be a number of seconds above 0", above=True, error=ConfigurationError
        )
        self.path = Path(path)
        self.lease = float(lease)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="asyncsdk-journal")
        self._db: sqlite3.Connection | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"<SQLiteJournal {str(self.path)!r} lease={self.lease:g}>"

    async def _run(self, op: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise ConfigurationError("the journal is closed; open a new one")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self._call, op)

    def _call(self, op: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return op(self._connection())
        except (sqlite3.Error, OSError) as exc:
            raise JournalError(f"the journal {self.path} could not be used: {exc}") from exc

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            made_private(self.path.parent)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            os.close(fd)
            db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.execute(_SCHEMA)
            self._db = db
        return self._db

    async def claim(self, key: str, digest: str, arguments: str, owner: str) -> Claim:
        """Record the run of ``key`` or take a lapsed one over: :meth:`~asyncsdk.Journal.claim`."""
        lease = self.lease

        def op(db: sqlite3.Connection) -> Claim:
            now = time.time()
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute(_SELECT + " WHERE key = ?", (key,)).fetchone()
                if row is None:
                    db.execute(
                        "INSERT INTO asyncsdk_runs (key, digest, arguments, stage, owner, "
                        "lease_until, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (key, digest, arguments, RunStage.INTENT, owner, now + lease, now),
                    )
                    claimed = Claim(
                        RunEntry(
                            key=key,
                            digest=digest,
                            arguments=arguments,
                            stage=RunStage.INTENT,
                            owner=owner,
                            lease_until=now + lease,
                            updated_at=now,
                        ),
                        owned=True,
                    )
                else:
                    entry = _entry(self, row)
                    claimed = Claim(entry, owned=False)
                    if takeable(entry, digest, now):
                        db.execute(
                            "UPDATE asyncsdk_runs SET owner = ?, lease_until = ? WHERE key = ?",
                            (owner, now + lease, key),
                        )
                        taken = attrs.evolve(entry, owner=owner, lease_until=now + lease)
                        claimed = Claim(taken, owned=True)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return claimed

        return await self._run(op)

    async def advance(
        self,
        key: str,
        owner: str,
        stage: str,
        *,
        order_id: str | None = None,
        request: str | None = None,
        process_ids: tuple[str, ...] | None = None,
        result: str | None = None,
    ) -> None:
        """Record the run's next stage: :meth:`~asyncsdk.Journal.advance`."""
        changes: dict[str, Any] = recorded(
            stage,
            order_id=order_id,
            request=request,
            process_ids=process_ids,
            result=result,
        )
        lease = self.lease

        def op(db: sqlite3.Connection) -> int:
            now = time.time()
            columns = ", ".join(f"{name} = ?" for name in changes)
            cursor = db.execute(
                f"UPDATE asyncsdk_runs SET {columns}, lease_until = ?, updated_at = ? "
                "WHERE key = ? AND owner = ?",
                (*changes.values(), now + lease, now, key, owner),
            )
            return cursor.rowcount

        if await self._run(op) != 1:
            raise taken_over(key, self.lease)

    async def renew(self, key: str, owner: str) -> bool:
        """Extend ``owner``'s lease on ``key``: :meth:`~asyncsdk.Journal.renew`."""
        lease = self.lease

        def op(db: sqlite3.Connection) -> bool:
            cursor = db.execute(
                "UPDATE asyncsdk_runs SET lease_until = ? WHERE key = ? AND owner = ?",
                (time.time() + lease, key, owner),
            )
            return cursor.rowcount == 1

        return await self._run(op)

    async def release(self, key: str, owner: str) -> None:
        """Give the lease on ``key`` up: :meth:`~asyncsdk.Journal.release`."""

        def op(db: sqlite3.Connection) -> None:
            db.execute(
                "UPDATE asyncsdk_runs SET owner = '', lease_until = 0 WHERE key = ? AND owner = ?",
                (key, owner),
            )

        await self._run(op)

    async def get(self, key: str) -> RunEntry | None:
        """The entry of ``key``, or None: :meth:`~asyncsdk.Journal.get`."""

        def op(db: sqlite3.Connection) -> RunEntry | None:
            row = db.execute(_SELECT + " WHERE key = ?", (key,)).fetchone()
            return None if row is None else _entry(self, row)

        return await self._run(op)

    async def unfinished(self) -> list[RunEntry]:
        """The runs not finished, oldest first: :meth:`~asyncsdk.Journal.unfinished`."""

        def op(db: sqlite3.Connection) -> list[RunEntry]:
            rows = db.execute(
                _SELECT + " WHERE stage != ? ORDER BY updated_at, key",
                (RunStage.FINISHED,),
            ).fetchall()
            return [_entry(self, row) for row in rows]

        return await self._run(op)

    async def close(self) -> None:
        """Release what the journal holds: :meth:`~asyncsdk.Journal.close`."""
        if self._closed:
            return
        self._closed = True

        def shut() -> None:
            if self._db is not None:
                self._db.close()
                self._db = None

        await asyncio.get_running_loop().run_in_executor(self._thread, shut)
        self._thread.shutdown(wait=False)
