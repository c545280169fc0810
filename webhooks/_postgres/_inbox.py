""":class:`PostgresInbox`: the receiver's durable inbox in a PostgreSQL table, for every process.

The dedup claim is the table's unique key: a ``put`` is one ``INSERT ... ON CONFLICT`` that
either stores the event or finds it held.  Consumers claim due rows with ``FOR UPDATE SKIP
LOCKED``, so several processes (on several hosts) take disjoint batches without waiting for each
other, and a claim older than ``claim_timeout`` is taken over by whoever claims next.

Handlers registered with ``atomic=True`` queue their writes on a :class:`PostgresWrites`; the
inbox runs them in the transaction that acks the entry, on the same database, only while the
process still holds the entry (:class:`~webhooks.AtomicInbox`).
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Final, TypeVar

import attrs

from asyncsdk import ConfigurationError
from webhooks._checks import check_consumer, check_limit, positive_seconds, require_seconds
from webhooks._codec import claimed_entry, dedup_key_text, encode_event, entry_from_row
from webhooks._contract import (
    DEFAULT_CLAIM_TIMEOUT,
    DEFAULT_DEDUP_RETENTION,
    InboxEntry,
    InboxStats,
    StoredEvent,
)
from webhooks._errors import InboxError, InboxUnavailableError, UnknownEntryError
from webhooks._postgres import _sql
from webhooks._postgres._connect import (
    DEFAULT_SCHEMA,
    check_dsn,
    check_schema,
    create_pool,
    ensure_schema,
    open_connection,
    pooler,
    require_asyncpg,
    translate_errors,
    where,
)
from webhooks._postgres._losses import AnsweredWindow, loss_line
from webhooks._postgres._puts import PutBatcher, Row, Stored
from webhooks._postgres._writes import PostgresWrites, Step

if TYPE_CHECKING:
    import asyncpg

__all__ = ["PostgresInbox"]

logger = logging.getLogger("webhooks.postgres")

_PURGE_EVERY: Final = 60.0
"""Seconds between deletions of finished rows past their retention."""
_MAX_DELAY: Final = 10 * 365 * 86400.0
_MAX_ID_DIGITS: Final = 18
"""Longer digit strings cannot be a bigint id, so they are no entry of this inbox."""

T = TypeVar("T")


@attrs.define(eq=False, repr=False)
class PostgresInbox:
    """An :class:`~webhooks.Inbox` in PostgreSQL, shared by every process using the same schema.

    ::

        inbox = PostgresInbox("postgresql://app@db.internal/app", schema="webhooks")
        receiver = WebhookReceiver(..., inbox=inbox)

    The inbox opens a pool on ``dsn`` at its first use and closes it in ``close``; the schema and
    its tables are created then if they do not exist.  Through PgBouncer in transaction mode, add
    ``?pooler=transaction`` to the DSN (statements are then not cached on the connections).  A
    finished event's row (without its bodies) holds its dedup key ``retention`` seconds after the
    ack, then it is deleted.
    """

    dsn: str = attrs.field(converter=check_dsn)
    schema: str = attrs.field(default=DEFAULT_SCHEMA, kw_only=True, converter=check_schema)
    claim_timeout: float = attrs.field(
        default=DEFAULT_CLAIM_TIMEOUT, kw_only=True, validator=positive_seconds
    )
    """Seconds after which a claim that was not extended counts as abandoned."""
    retention: float = attrs.field(
        default=DEFAULT_DEDUP_RETENTION, kw_only=True, validator=positive_seconds
    )
    """Seconds a finished event's dedup key is kept after its ack."""
    _statements: _sql.InboxSQL = attrs.field(init=False)
    _pool: asyncpg.Pool | None = attrs.field(default=None, init=False)
    _puts: PutBatcher = attrs.field(init=False)
    _opening: asyncio.Lock = attrs.field(factory=asyncio.Lock, init=False)
    _closed: bool = attrs.field(default=False, init=False)
    _next_purge: float = attrs.field(default=0.0, init=False)
    _answered: AnsweredWindow = attrs.field(factory=AnsweredWindow, init=False)
    """The ids this node answered lately, and the server it reached: a failover's losses."""
    _looking: set[asyncio.Task[None]] = attrs.field(factory=set, init=False)

    def __attrs_post_init__(self) -> None:
        require_asyncpg()
        self._statements = _sql.InboxSQL(self.schema)
        self._puts = PutBatcher(self._store)

    def __repr__(self) -> str:
        return f"PostgresInbox({where(self.dsn)!r}, schema={self.schema!r})"

    # -- the Inbox contract -----------------------------------------------------------------

    async def put(self, event: StoredEvent, raw: bytes) -> bool:
        """Claim the event's dedup key and store it, committed on return (puts made at the same
        time share one statement and one commit: see :mod:`webhooks._postgres._puts`)."""
        return await self.submit_put(event, raw)

    def submit_put(self, event: StoredEvent, raw: bytes) -> asyncio.Future[bool]:
        """Queue the put for the next batch and return the future of its answer.

        The write goes ahead whatever becomes of the future: cancelling it, or giving up on it
        after a deadline, only drops the answer.  Raises :class:`~webhooks.InboxUnavailableError`
        at once if the inbox is closed; :meth:`close` waits for puts already queued.
        """
        self._check_open()
        row = (dedup_key_text(event), encode_event(event), bytes(raw), None)
        return self._puts.submit(row, _is_stored)

    def submit_put_claimed(
        self, event: StoredEvent, raw: bytes, consumer: str
    ) -> asyncio.Future[InboxEntry | None]:
        """:meth:`submit_put`, the new row stored already claimed by ``consumer`` (in the same
        batch as other puts): the future gets its entry after the commit (``None``: a
        duplicate)."""
        consumer = check_consumer(consumer)
        self._check_open()
        body = bytes(raw)

        row = (dedup_key_text(event), encode_event(event), body, consumer)
        return self._puts.submit(row, functools.partial(claimed_entry, event=event, raw=body))

    async def claim_batch(self, consumer: str, limit: int) -> list[InboxEntry]:
        """Due entries, oldest first, and those whose claim lapsed."""
        consumer = check_consumer(consumer)
        check_limit(limit)
        if limit == 0:
            return []
        await self._maybe_purge()
        rows = await self._call(
            "claim",
            lambda pool: pool.fetch(
                self._statements.claim, consumer, limit, float(self.claim_timeout)
            ),
        )
        return sorted((entry_from_row(row) for row in rows), key=lambda entry: int(entry.id))

    async def extend(self, consumer: str, entry_ids: Sequence[str]) -> None:
        """Renew the claims ``consumer`` holds on ``entry_ids``: :meth:`~webhooks.Inbox.extend`."""
        consumer = check_consumer(consumer)
        ids = _ids(entry_ids)
        if ids:
            await self._call(
                "extend", lambda pool: pool.execute(self._statements.extend, consumer, ids)
            )

    async def ack(self, entry_id: str) -> None:
        """Mark the entry finished for good: :meth:`~webhooks.Inbox.ack`."""
        await self.ack_many((entry_id,))

    async def ack_many(self, entry_ids: Sequence[str]) -> None:
        """:meth:`ack` for every id, in one statement."""
        ids = _ids(entry_ids)
        if ids:
            await self._call("ack", lambda pool: pool.execute(self._statements.ack, ids))

    def new_writes(self) -> PostgresWrites:
        """An empty :class:`PostgresWrites` for the ``atomic=True`` handlers of one entry."""
        return PostgresWrites()

    async def ack_with(
        self, entry_id: str, consumer: str, writes: Sequence[PostgresWrites]
    ) -> bool:
        """Run the ``writes`` (in order) and ack the entry in one transaction, if ``consumer``
        still holds it; ``False`` (and nothing written) if it does not."""
        consumer = check_consumer(consumer)
        steps: list[Step] = []
        for buffer in writes:
            if not isinstance(buffer, PostgresWrites):
                raise ConfigurationError(
                    f"PostgresInbox.ack_with takes PostgresWrites from new_writes(), not {buffer!r}"
                )
            steps.extend(buffer.steps)
        ids = _ids((entry_id,))
        if not ids:
            return False
        with translate_errors(InboxUnavailableError, InboxError, "inbox ack_with", self.dsn):
            pool = await self._ready_pool()
            async with pool.acquire() as conn:
                try:
                    async with conn.transaction():
                        # Locks the row: nobody takes the entry over until this transaction ends.
                        if await conn.fetchval(self._statements.hold, ids[0], consumer) is None:
                            return False
                        for step in steps:
                            await step(conn)
                        await conn.execute(self._statements.ack, ids)
                finally:
                    if steps:
                        await _reset_after_user_code(conn)
        return True

    async def retry_later(self, entry_id: str, error: str, delay: float) -> None:
        """Release the entry, due again in ``delay`` s: :meth:`~webhooks.Inbox.retry_later`."""
        delay = require_seconds("delay", delay, zero_ok=True)
        ids = _ids((entry_id,))
        if ids:
            seconds = float(min(delay, _MAX_DELAY))
            await self._call(
                "retry_later",
                lambda pool: pool.execute(
                    self._statements.retry_later, ids[0], str(error), seconds
                ),
            )

    async def dead_letter(self, entry_id: str, error: str) -> None:
        """Park the entry until replayed; record ``error``: :meth:`~webhooks.Inbox.dead_letter`."""
        ids = _ids((entry_id,))
        if ids:
            await self._call(
                "dead_letter",
                lambda pool: pool.execute(self._statements.dead_letter, ids[0], str(error)),
            )

    async def dead_letters(self, limit: int = 1000) -> list[InboxEntry]:
        """The parked entries, oldest first: :meth:`~webhooks.Inbox.dead_letters`."""
        check_limit(limit)
        if limit == 0:
            return []
        rows = await self._call(
            "dead_letters", lambda pool: pool.fetch(self._statements.dead_letters, limit)
        )
        return [entry_from_row(row) for row in rows]

    async def replay(self, entry_id: str) -> None:
        """Move a dead letter back to pending, attempts reset: :meth:`~webhooks.Inbox.replay`."""
        ids = _ids((entry_id,))
        if (
            not ids
            or await self._call(
                "replay", lambda pool: pool.fetchval(self._statements.replay, ids[0])
            )
            is None
        ):
            raise UnknownEntryError(
                f"no dead letter with id {entry_id!r} in the inbox in schema {self.schema!r};"
                " list them with dead_letters()"
            )

    async def purge(self, entry_id: str) -> None:
        """Drop a dead letter for good: :meth:`~webhooks.InspectableInbox.purge`."""
        ids = _ids((entry_id,))
        if (
            not ids
            or await self._call(
                "purge", lambda pool: pool.fetchval(self._statements.purge_dead, ids[0])
            )
            is None
        ):
            raise UnknownEntryError(
                f"no dead letter with id {entry_id!r} in the inbox in schema {self.schema!r};"
                " list them with dead_letters()"
            )

    async def stats(self) -> InboxStats:
        """Depth, oldest entry's age, dead letters: :meth:`~webhooks.InspectableInbox.stats`."""
        row = await self._call("stats", lambda pool: pool.fetchrow(self._statements.stats))
        depth, oldest_age, dead, replayed, lost, lost_at = (
            row if row is not None else (0, None, 0, 0, 0, None)
        )
        age = None if oldest_age is None else max(0.0, float(oldest_age))
        last = None
        if lost_at is not None:
            when = datetime.datetime.fromtimestamp(int(lost_at), datetime.UTC)
            last = f"last found {when.isoformat(timespec='seconds')}, after a failover"
        return InboxStats(
            depth=int(depth),
            oldest_age=age,
            dead=int(dead),
            replayed=int(replayed),
            lost=int(lost),
            last_loss=last,
        )

    async def pending_count(self) -> int:
        """Entries neither acked nor dead-lettered: :meth:`~webhooks.Inbox.pending_count`."""
        return int(
            await self._call(
                "pending_count", lambda pool: pool.fetchval(self._statements.pending_count)
            )
        )

    async def check(self) -> None:
        """Raise ``InboxUnavailableError`` if the store is down: :meth:`~webhooks.Inbox.check`."""
        await self._call("check", lambda pool: pool.fetch(self._statements.check))

    async def exists(self) -> bool:
        """Whether the schema holds an inbox table, asked on a connection of its own (without
        creating anything, as every other method does at its first use)."""
        with translate_errors(InboxUnavailableError, InboxError, "inbox exists", self.dsn):
            conn = await open_connection(self.dsn)
            try:
                return bool(await conn.fetchval(self._statements.exists, self.schema))
            finally:
                await conn.close()

    async def close(self) -> None:
        """Close the pool.  Entries stay in the database."""
        if self._closed:
            return
        await self._puts.sent()  # puts already queued commit before the inbox closes
        if self._looking:  # a look for a failover's losses finishes first
            await asyncio.wait(self._looking)
        self._closed = True
        async with self._opening:  # an opening under way finishes first
            pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    # -- internals ------------------------------------------------------------------------------

    async def _store(self, rows: Sequence[Row]) -> dict[str, Stored]:
        """Store rows of distinct keys in one statement; the keys stored (the rest are held),
        each with its entry's id and receive time."""
        with translate_errors(InboxUnavailableError, InboxError, "inbox put", self.dsn):
            pool = await self._ready_pool()
            stored = await pool.fetch(
                self._statements.put,
                [row[0] for row in rows],
                [row[1] for row in rows],
                [row[2] for row in rows],
                float(self.retention),
                [row[3] for row in rows],
            )
        self._answered.note(record[1] for record in stored)
        return {record[0]: (record[1], record[2]) for record in stored}

    def _check_open(self) -> None:
        if self._closed:
            raise InboxUnavailableError(
                "the PostgreSQL inbox is closed; create a new PostgresInbox to use it again"
            )

    async def _ready_pool(self) -> asyncpg.Pool:
        """The pool, opened (and the schema made) by the first caller."""
        self._check_open()
        if self._pool is None:
            async with self._opening:
                self._check_open()
                if self._pool is None:
                    pool = await create_pool(self.dsn, init=self._connected)
                    try:
                        await ensure_schema(pool, self.schema, self.dsn)
                    except BaseException:
                        pool.terminate()
                        raise
                    self._pool = pool
                    through = pooler(self.dsn)
                    logger.info(
                        "inbox on PostgreSQL at %s, schema %s: %s",
                        where(self.dsn),
                        self.schema,
                        f"through a {through} pooler" if through else "direct",
                    )
        return self._pool

    async def _connected(self, conn: asyncpg.Connection) -> None:
        """A new connection of the pool: when it reached another server than the one before
        (a promoted standby), look for the entries this node answered lately."""
        started = await conn.fetchval(_sql.SERVER_STARTED)
        if self._answered.server_seen(started):
            task = asyncio.get_running_loop().create_task(self._look_for_losses())
            self._looking.add(task)
            task.add_done_callback(self._looking.discard)

    async def _look_for_losses(self) -> None:
        """Count and log the entries this node answered in the last ``WINDOW`` seconds that the
        server no longer holds (:mod:`webhooks._postgres._losses`)."""
        answered = self._answered.recent()
        if not answered:
            return
        try:
            pool = await self._ready_pool()
            present = {row[0] for row in await pool.fetch(self._statements.present, answered)}
            lost = [entry_id for entry_id in answered if entry_id not in present]
            if lost:
                await pool.execute(self._statements.count_lost, len(lost), int(time.time()))
        except Exception as exc:  # the next server change looks again
            logger.warning("looking for entries a failover lost failed: %s", exc)
            return
        if lost:
            self._answered.forget(lost)
            logger.error(loss_line(len(lost), where(self.dsn), self.schema))

    async def _call(self, what: str, op: Callable[[asyncpg.Pool], Awaitable[T]]) -> T:
        """``op`` on the pool, with asyncpg's errors turned into the inbox's."""
        with translate_errors(InboxUnavailableError, InboxError, f"inbox {what}", self.dsn):
            return await op(await self._ready_pool())

    async def _maybe_purge(self) -> None:
        now = asyncio.get_running_loop().time()
        if now < self._next_purge:
            return
        self._next_purge = now + _PURGE_EVERY
        await self._call(
            "purge", lambda pool: pool.execute(self._statements.purge, float(self.retention))
        )


def _ids(entry_ids: Sequence[str]) -> list[int]:
    """The ids that can be rows of the table (ids of other backends are no entry here)."""
    return [
        int(entry_id)
        for entry_id in entry_ids
        if isinstance(entry_id, str)
        and entry_id.isascii()
        and entry_id.isdigit()
        and len(entry_id) <= _MAX_ID_DIGITS
    ]


async def _reset_after_user_code(conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record]) -> None:
    """A handler's functions ran on ``conn``: drop whatever session state they left (``SET``,
    ``LISTEN``, session locks) before the pool hands the connection out again, which it does
    without a reset of its own.  A connection that cannot be reset is not handed out again."""
    try:
        await conn.reset()
    except Exception:
        conn.terminate()
        raise


def _is_stored(stored: Stored | None) -> bool:
    return stored is not None
