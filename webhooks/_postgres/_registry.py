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

Through a pooler in transaction mode (``?pooler=transaction`` in the DSN) no connection can
LISTEN: the instance listens on ``listen_dsn`` (a direct connection) when given one, else it
polls, reading every id still waited for each ``poll_interval`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, Final

import attrs

from asyncsdk import ConfigurationError
from webhooks._checks import positive_seconds
from webhooks._codec import encode_event
from webhooks._errors import RegistryClosedError, RegistryUnavailableError
from webhooks._postgres import _sql
from webhooks._postgres._connect import (
    DEFAULT_SCHEMA,
    TRANSACTION,
    check_dsn,
    check_listen_dsn,
    check_schema,
    close_connection,
    create_pool,
    ensure_schema,
    listen,
    pooler,
    require_asyncpg,
    translate_errors,
    where,
)
from webhooks._registry import DEFAULT_KEEP_FOR
from webhooks._remote_registry import RemoteRegistry, Wording

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


@attrs.define(eq=False, repr=False)
class PostgresRegistry(RemoteRegistry):
    """A waiter registry shared by every process using the same PostgreSQL database and schema.

    Same API as :class:`~webhooks.Registry`: ``wait`` (the client's ``ResultWaiter``), ``resolve``
    and ``set_healthy`` (the receiver's sink), ``close`` / ``async with``.  A waiter in one process
    is woken by a ``resolve`` in any other::

        async with PostgresRegistry("postgresql://app@db.internal/app") as registry:
            event = await registry.wait(process_id, timeout=600)

    Each instance holds one listening connection and a small pool, however many coroutines wait.
    Results are kept in the database for ``keep_for`` seconds (the first event of a process id
    wins), so a wait that starts late still finds them.

    Through PgBouncer in transaction mode (``?pooler=transaction`` in ``dsn``), pass a direct
    ``listen_dsn`` for the listening connection; without one the instance polls every
    ``poll_interval`` seconds instead (a wake-up then takes up to that long).
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
    listen_dsn: str | None = attrs.field(default=None, kw_only=True, converter=check_listen_dsn)
    """A DSN for the listening connection alone (default: ``dsn``), for a ``dsn`` that goes
    through a pooler in transaction mode."""
    poll_interval: float = attrs.field(default=1.0, kw_only=True, validator=positive_seconds)
    """Seconds between reads of the ids waited for, when the instance polls (``dsn`` through a
    pooler in transaction mode and no ``listen_dsn``)."""
    _statements: _sql.RegistrySQL = attrs.field(init=False)
    _WORDING: ClassVar[Wording] = Wording(
        logger=logger,
        tasks="postgres-registry",
        store="PostgreSQL",
        lost="listening on %s lost (%r); connecting again in %.2f s",
        undecodable="ignoring an undecodable result in schema %s",
    )
    _pool: asyncpg.Pool | None = attrs.field(default=None, init=False)
    _opening: asyncio.Lock = attrs.field(factory=asyncio.Lock, init=False)
    _next_purge: float = attrs.field(default=0.0, init=False)

    def __attrs_post_init__(self) -> None:
        require_asyncpg()
        self._statements = _sql.RegistrySQL(self.schema)
        self._setup(
            keep_for=self.keep_for,
            scope=self.schema,
            channel=_sql.channel(self.schema),
            source=self.schema,
        )

    def __repr__(self) -> str:
        return f"PostgresRegistry({where(self.dsn)!r}, schema={self.schema!r})"

    @property
    def polls(self) -> bool:
        """Whether the instance polls instead of listening (``dsn`` through a pooler in
        transaction mode, no ``listen_dsn``)."""
        return self.listen_dsn is None and pooler(self.dsn) == TRANSACTION

    @property
    def mode(self) -> str:
        """How the instance reaches the server and hears of results, in words (for its log
        line at start)."""
        through = f"through a {pooler(self.dsn)} pooler" if pooler(self.dsn) else "direct"
        if self.polls:
            return f"{through}, polling every {self.poll_interval:g} s"
        heard = self.dsn if self.listen_dsn is None else self.listen_dsn
        return f"{through}, listening on {where(heard)}"

    async def start(self, *, timeout: float = 10.0) -> None:
        """Listen now (or, polling, start to poll) and wait until that is live.

        Raises :class:`~asyncsdk.ConfigurationError` (after closing the registry) at once when the
        server refuses the login or its TLS certificate is refused, and
        :class:`~webhooks.RegistryUnavailableError` (after closing it) if the server does not
        answer within ``timeout`` seconds.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            async with asyncio.timeout(timeout):
                with translate_errors(
                    RegistryUnavailableError, RegistryUnavailableError, "registry start", self.dsn
                ):
                    await self._ready_pool()
        except ConfigurationError:
            await self.close()
            raise
        except TimeoutError:
            await self.close()
            raise RegistryUnavailableError(self._unreachable(timeout)) from None
        except RegistryUnavailableError:
            pass  # the listening task tries again for the rest of the timeout, and says why not
        try:
            await super().start(timeout=max(0.0, deadline - loop.time()))
        except RegistryUnavailableError:  # said with the whole timeout, not what was left of it
            raise RegistryUnavailableError(self._unreachable(timeout)) from None

    async def resolve(self, event: ProcessCompleted) -> None:
        """Store the event under its process id (first wins) and notify every instance.

        Raises :class:`RegistryUnavailableError` when the server cannot be reached, so the
        receiver retries the event later.
        """
        self._check_can_resolve(event)
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
            self._local.resolve_nowait(event)  # no need to wait for our own notification

    # -- the store's side ---------------------------------------------------------------------

    def _unreachable(self, timeout: float) -> str:
        return (
            f"could not listen on {self._channel!r} on PostgreSQL at {where(self.dsn)}"
            f" within {timeout} s; is the server running?"
        )

    async def _release(self) -> None:
        async with self._opening:  # an opening under way finishes first
            pool, self._pool = self._pool, None
        if pool is not None:
            try:
                await asyncio.wait_for(pool.close(), timeout=_CLOSE_TIMEOUT)
            except TimeoutError:
                pool.terminate()

    # -- background work ----------------------------------------------------------------------

    async def _ready_pool(self) -> asyncpg.Pool:
        """The pool for resolves and reads, opened (and the schema made) by the first caller."""
        if self._pool is None:
            async with self._opening:
                if self._closed:
                    raise RegistryClosedError("the registry was closed; create a new one")
                if self._pool is None:
                    pool = await create_pool(self.dsn, max_size=_POOL_SIZE)
                    try:
                        await ensure_schema(pool, self.schema, self.dsn)
                    except BaseException:
                        pool.terminate()
                        raise
                    self._pool = pool
                    logger.info(
                        "registry on PostgreSQL at %s, schema %s: %s",
                        where(self.dsn),
                        self.schema,
                        self.mode,
                    )
        return self._pool

    async def _maybe_purge(self, pool: asyncpg.Pool) -> None:
        now = asyncio.get_running_loop().time()
        if now >= self._next_purge:
            self._next_purge = now + _PURGE_EVERY
            await pool.execute(self._statements.purge)

    def _notified(self, connection: object, pid: int, channel: str, payload: object) -> None:
        """A notification: the process id of a stored result; read it if someone here waits."""
        if isinstance(payload, str):
            self._heard_of(payload)

    async def _listen(self, connected: Callable[[], None]) -> None:
        """The one listening connection: connect, LISTEN, re-read pending ids, keep checking.

        Each new connection re-reads every id still waited for, which covers the notifications
        sent while there was none.
        """
        await self._ready_pool()  # the schema exists before the first read
        if self.polls:
            await self._poll(connected)
            return
        listen_on = self.dsn if self.listen_dsn is None else self.listen_dsn
        with translate_errors(ConnectionError, ConnectionError, "registry listen", listen_on):
            conn, lost = await listen(listen_on, self._channel, self._notified)
        try:
            connected()
            await self._keep_checking(conn, lost)
        finally:
            await close_connection(conn)

    async def _poll(self, connected: Callable[[], None]) -> None:
        """Instead of listening: every ``poll_interval``, ask for every id still waited for, and
        raise (to be started again) when a round trip goes unanswered for ``ping_interval``."""
        connected()
        while True:
            await asyncio.sleep(self.poll_interval)
            for process_id in self._local.pending_ids():
                self._want_read(process_id)
            pool = await self._ready_pool()
            async with asyncio.timeout(self.ping_interval):
                await pool.fetchval("SELECT 1")

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

    async def _read(self, ids: list[str]) -> None:
        """Read the results of ``ids`` (one query per chunk)."""
        pool = await self._ready_pool()
        for start in range(0, len(ids), _READ_CHUNK):
            for row in await pool.fetch(self._statements.read, ids[start : start + _READ_CHUNK]):
                self._deliver(row[0])
