""":class:`PostgresRegistry`: the waiter registry shared through PostgreSQL, woken by LISTEN/NOTIFY.

::

    process A: registry.wait(pid)             process B (receiver): registry.resolve(event)
      listens on "<schema>.results"  <─ NOTIFY pid ─  INSERT the event into <schema>.results
      reads <schema>.results for pid                  (first wins), NOTIFY as it commits

``resolve`` stores the event in the results table (the first event of a process id wins while it
is kept) and, in the same statement, notifies the channel with the process id; the notification
is sent when that transaction commits, so a listener that hears it finds the row.  Each instance
listens on one dedicated connection and reads the rows of the ids its waiters want (a
notification carries only the id: events can be larger than a notification may be).  A wait that
starts after the event landed finds it by the same read.  When the listening connection drops,
the instance connects again and re-reads every id still waited for, so nothing is missed while
it was down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Final, Self

import attrs

from webhooks._checks import positive_seconds
from webhooks._codec import encode_event
from webhooks._errors import RegistryClosedError, RegistryUnavailableError
from webhooks._postgres import _sql
from webhooks._postgres._connect import (
    DEFAULT_SCHEMA,
    check_dsn,
    check_schema,
    close_connection,
    create_pool,
    ensure_schema,
    listen,
    require_asyncpg,
    translate_errors,
    where,
)
from webhooks._registry import (
    DEFAULT_KEEP_FOR,
    RegistryStats,
)
from webhooks._remote_registry import RemoteWaiters, Wording

if TYPE_CHECKING:
    import asyncpg

    from asyncsdk import ProcessCompleted

__all__ = ["PostgresRegistry"]

logger = logging.getLogger("webhooks.postgres")

_READ_CHUNK: Final = 1000
"""Process ids per read."""
_CLOSE_TIMEOUT: Final = 5.0
"""Seconds close() waits for its pool to close before terminating it."""
_PURGE_EVERY: Final = 60.0
"""Seconds between deletions of expired results."""
_POOL_SIZE: Final = 4
_WORDING: Final = Wording(
    logger=logger,
    tasks="postgres-registry",
    store="PostgreSQL",
    lost="listening on %s lost (%r); connecting again in %.2f s",
    undecodable="ignoring an undecodable result in schema %s",
)


@attrs.define(eq=False, repr=False)
class PostgresRegistry:
    """A waiter registry shared by every process using the same PostgreSQL database and schema.

    Same API as :class:`~webhooks.Registry`: ``wait`` (the client's ``ResultWaiter``), ``resolve``
    and ``set_healthy`` (the receiver's sink), ``close`` / ``async with``.  A waiter in one process
    is woken by a ``resolve`` in any other::

        async with PostgresRegistry("postgresql://app@db.internal/app") as registry:
            event = await registry.wait(process_id, timeout=600)

    Each instance holds one listening connection and a small pool, however many coroutines wait.
    Results are kept in the database for ``keep_for`` seconds (the first event of a process id
    wins), so a wait that starts late still finds them.
    """

    dsn: str = attrs.field(converter=check_dsn)
    schema: str = attrs.field(default=DEFAULT_SCHEMA, kw_only=True, converter=check_schema)
    keep_for: float = attrs.field(
        default=DEFAULT_KEEP_FOR, kw_only=True, validator=positive_seconds
    )
    """Seconds a result stays in the database for waiters that start after it landed."""
    ping_interval: float = attrs.field(default=10.0, kw_only=True, validator=positive_seconds)
    """Seconds between checks of the listening connection; one unanswered for that long and the
    connection is dropped and made again."""
    _statements: _sql.RegistrySQL = attrs.field(init=False)
    _channel: str = attrs.field(init=False)
    _waiters: RemoteWaiters = attrs.field(init=False)
    _pool: asyncpg.Pool | None = attrs.field(default=None, init=False)
    _opening: asyncio.Lock = attrs.field(factory=asyncio.Lock, init=False)
    _next_purge: float = attrs.field(default=0.0, init=False)

    def __attrs_post_init__(self) -> None:
        require_asyncpg()
        self._statements = _sql.RegistrySQL(self.schema)
        self._channel = _sql.channel(self.schema)
        self._waiters = RemoteWaiters(
            wording=_WORDING,
            keep_for=self.keep_for,
            scope=self.schema,
            channel=self._channel,
            source=self.schema,
            listen=self._listen_once,
            read=self._read_results,
        )

    def __repr__(self) -> str:
        return f"PostgresRegistry({where(self.dsn)!r}, schema={self.schema!r})"

    # -- ResultWaiter -------------------------------------------------------------------------

    @property
    def healthy(self) -> bool:
        """True while the listening connection is live, the registry open, and no receiver of
        this process has reported itself stopped (``set_healthy(False)``)."""
        return self._waiters.healthy

    async def wait(self, process_id: str, *, timeout: float | None = None) -> ProcessCompleted:
        """Return the event of ``process_id`` as soon as any process resolves it.

        Raises :class:`~asyncsdk.WaitTimeoutError` (a ``TimeoutError``) when ``timeout`` passes
        first and :class:`~webhooks.RegistryClosedError` when the registry is or gets closed.
        The server being briefly unreachable does not fail a wait: results are re-read on
        reconnect.
        """
        return await self._waiters.wait(process_id, timeout)

    # -- sink ---------------------------------------------------------------------------------

    def set_healthy(self, healthy: bool) -> None:
        """Record whether the receiver of this process runs; starts listening if it does."""
        self._waiters.set_healthy(healthy)

    async def resolve(self, event: ProcessCompleted) -> None:
        """Store the event under its process id (first wins) and notify every instance.

        Raises :class:`RegistryUnavailableError` when the server cannot be reached, so the
        receiver retries the event later.
        """
        self._waiters.check_can_resolve(event)
        with translate_errors(
            RegistryUnavailableError, RegistryUnavailableError, "registry resolve", self.dsn
        ):
            pool = await self._ready_pool()
            stored = await pool.fetchval(
                self._statements.resolve,
                event.process_id,
                encode_event(event),
                float(self.keep_for),
                self._channel,
            )
            await self._maybe_purge(pool)
        if stored:
            self._waiters.local.resolve_nowait(event)  # no need to wait for our own notification

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self, *, timeout: float = 10.0) -> None:
        """Listen now and wait until the listening connection is live.

        Raises :class:`RegistryUnavailableError` (after closing the registry) if the server does
        not answer within ``timeout`` seconds.
        """
        if not await self._waiters.until_live(timeout):
            await self.close()
            raise RegistryUnavailableError(
                f"could not listen on {self._channel!r} on PostgreSQL at {where(self.dsn)}"
                f" within {timeout} s; is the server running?"
            )

    async def close(self) -> None:
        """Stop listening, fail pending waiters with RegistryClosedError, release connections."""
        if self._waiters.closed:
            return
        await self._waiters.close()
        async with self._opening:  # an opening under way finishes first
            pool, self._pool = self._pool, None
        if pool is not None:
            try:
                await asyncio.wait_for(pool.close(), timeout=_CLOSE_TIMEOUT)
            except TimeoutError:
                pool.terminate()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- introspection ------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._waiters.closed

    @property
    def pending_count(self) -> int:
        """Coroutines of this process currently inside :meth:`wait`."""
        return self._waiters.local.pending_count

    @property
    def stats(self) -> RegistryStats:
        """What this process holds in memory (events read recently are kept a few seconds)."""
        return self._waiters.local.stats

    @property
    def subscriptions(self) -> int:
        """How many times the listening connection was made (1 + the reconnects so far)."""
        return self._waiters.subscriptions

    # -- background work ----------------------------------------------------------------------

    async def _ready_pool(self) -> asyncpg.Pool:
        """The pool for resolves and reads, opened (and the schema made) by the first caller."""
        if self._pool is None:
            async with self._opening:
                if self._waiters.closed:
                    raise RegistryClosedError("the registry was closed; create a new one")
                if self._pool is None:
                    pool = await create_pool(self.dsn, max_size=_POOL_SIZE)
                    try:
                        await ensure_schema(pool, self.schema)
                    except BaseException:
                        pool.terminate()
                        raise
                    self._pool = pool
        return self._pool

    async def _maybe_purge(self, pool: asyncpg.Pool) -> None:
        now = asyncio.get_running_loop().time()
        if now >= self._next_purge:
            self._next_purge = now + _PURGE_EVERY
            await pool.execute(self._statements.purge)

    def _notified(self, connection: object, pid: int, channel: str, payload: object) -> None:
        """A notification: the process id of a stored result; read it if someone here waits."""
        if isinstance(payload, str):
            self._waiters.heard_of(payload)

    async def _listen_once(self, connected: Callable[[], None]) -> None:
        """The one listening connection: connect, LISTEN, re-read pending ids, keep checking.

        Each new connection re-reads every id still waited for, which covers the notifications
        sent while there was none.
        """
        await self._ready_pool()  # the schema exists before the first read
        conn, lost = await listen(self.dsn, self._channel, self._notified)
        try:
            connected()
            await self._keep_checking(conn, lost)
        finally:
            await close_connection(conn)

    async def _keep_checking(self, conn: asyncpg.Connection, lost: asyncio.Event) -> None:
        """Raise once the listening connection is lost: at once when the server ends it, else
        when a round trip, made after each ``ping_interval`` of quiet, goes unanswered for as long
        (a dead network ends nothing by itself)."""
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.ping_interval):
                    await lost.wait()
            if lost.is_set():
                raise ConnectionError("the server closed the listening connection")
            async with asyncio.timeout(self.ping_interval):
                await conn.fetchval("SELECT 1")

    async def _read_results(self, ids: list[str]) -> None:
        """Read the results of ``ids`` (one query per chunk)."""
        pool = await self._ready_pool()
        for start in range(0, len(ids), _READ_CHUNK):
            for row in await pool.fetch(self._statements.read, ids[start : start + _READ_CHUNK]):
                self._waiters.deliver(row[0])
