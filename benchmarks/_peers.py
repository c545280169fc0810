"""The handlers the receiver is measured against: what a user would write by hand instead.

* ``bare``: read the body, ``json.loads`` it, answer 200.  No token, no storage: the floor of an
  aiohttp handler, and the reference line of every req/s ratio.
* ``memory-peer``: the token check, ``json.loads``, the dedup key looked up in a dict of the keys
  seen (kept for the inbox's retention), and the body put on an ``asyncio.Queue`` that eight
  worker tasks take from (the receiver's default eight workers, with no handler): the in-memory
  queue a user would write instead of :class:`~webhooks.MemoryInbox` and the worker pool.
* ``sqlite-peer``: the token check, ``json.loads``, one ``INSERT ... ON CONFLICT (dedup_key) DO
  NOTHING`` of the body into a SQLite file, committed before the answer.  The file has the
  settings of :class:`~webhooks.SQLiteInbox` (WAL, ``synchronous=FULL``), so each answer is as
  durable as the receiver's.  The statement runs on the event loop, one commit per request: the
  plainest code that is correct, and the cheapest in CPU (no thread, no queue).
* ``redis-peer``: the token check, ``json.loads``, and one Lua call (``EVALSHA`` of
  :data:`REDIS_STORE`) that sets the dedup key ``NX`` (with the inbox's retention) and, when the
  key was new, adds the body to a stream (``XADD``): one round trip, as a user who knows Redis would
  write it, with redis-py's asyncio client on a blocking pool of the inbox's size (hiredis parses
  its replies when installed, as for the inbox).
* ``postgres-peer``: the token check, ``json.loads``, one ``INSERT ... ON CONFLICT (dedup_key) DO
  NOTHING`` of the body with asyncpg, on a pool set up as :class:`~webhooks.PostgresInbox`'s (16
  connections at most, the same timeouts, no reset query when a connection goes back), so that
  the two differ by the work done and not by pool settings; committed (``synchronous_commit`` as
  the server has it, as for the inbox) before the answer.

Every peer keys an event as the receiver does: by (event, process_id, status).  The durable peers
store and answer: nothing takes their events afterwards, while the receiver's workers also claim
and ack each one; the memory peer's workers take each event off its queue, with nothing to ack.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Final

import attrs
from aiohttp import web

PEERS: Final = {
    "bare": "bare aiohttp handler",
    "memory-peer": "hand-written handler + asyncio.Queue",
    "sqlite-peer": "hand-written handler + SQLite",
    "redis-peer": "hand-written handler + Redis",
    "postgres-peer": "hand-written handler + PostgreSQL",
}
"""Each hand-written handler, by the name the report gives it: ``<store>-peer`` does by hand
what the receiver on that store does (a store without one has no CPU goal against a peer)."""
DEDUP_RETENTION: Final = 7 * 24 * 3600
"""Seconds a dedup key is kept: the inbox's default retention."""
POOL_SIZE: Final = 32
"""Redis connections at most, as the inbox's client."""
POSTGRES_POOL_SIZE: Final = 16
"""PostgreSQL connections at most, as the inbox's pool."""
WORKERS: Final = 8
"""The memory peer's worker tasks: the receiver's default."""
REDIS_STORE: Final = """
if redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[2]) then
    redis.call('XADD', KEYS[2], '*', 'raw', ARGV[1])
    return 1
end
return 0
"""
"""The Redis peer's store, one call: KEYS = (dedup key, stream), ARGV = (body, retention s);
1 when stored, 0 for a duplicate."""

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,
    dedup_key TEXT NOT NULL UNIQUE,
    raw BLOB NOT NULL,
    received_at REAL NOT NULL
)
"""
_INSERT: Final = (
    "INSERT INTO events (dedup_key, raw, received_at) VALUES (?, ?, ?)"
    " ON CONFLICT (dedup_key) DO NOTHING"
)

_POSTGRES_TABLE: Final = """
CREATE TABLE IF NOT EXISTS "%(schema)s".events (
    dedup_key TEXT PRIMARY KEY,
    raw BYTEA NOT NULL,
    received_at DOUBLE PRECISION NOT NULL
)
"""

Handler = Callable[[web.Request], Awaitable[web.Response]]
Store = Callable[[str, bytes], Awaitable[bool]]


async def _bare(request: web.Request) -> web.Response:
    body = await request.read()
    event = json.loads(body)
    if not isinstance(event, dict) or "process_id" not in event:
        return web.json_response({"error": "not an event"}, status=400)
    return web.json_response({"status": "accepted"})


def _guarded(token: str, store: Store) -> Handler:
    """A handler that checks the token in the path, decodes the body, and calls ``store`` with
    the event's dedup key and the body (True: stored, False: a duplicate)."""
    expected = token.encode()

    async def handle(request: web.Request) -> web.Response:
        if not hmac.compare_digest(request.match_info["token"].encode(), expected):
            return web.json_response({"error": "unknown token"}, status=401)
        body = await request.read()
        event = json.loads(body)
        if not isinstance(event, dict) or "process_id" not in event:
            return web.json_response({"error": "not an event"}, status=400)
        key = f"{event.get('event')}:{event['process_id']}:{event.get('status')}"
        stored = await store(key, body)
        return web.json_response({"status": "accepted" if stored else "duplicate"})

    return handle


@attrs.define(eq=False)
class MemoryPeer:
    """The memory peer's state: the dedup keys seen (key -> when it may be stored again), the
    queue, and how many events its workers took."""

    seen: dict[str, float] = attrs.field(factory=dict)
    queue: asyncio.Queue[bytes] = attrs.field(factory=asyncio.Queue)
    handled: int = 0

    async def store(self, key: str, body: bytes) -> bool:
        now = time.time()
        if self.seen.get(key, 0.0) > now:
            return False
        self.seen[key] = now + DEDUP_RETENTION
        self.queue.put_nowait(body)
        return True

    async def workers(self, _app: web.Application) -> AsyncIterator[None]:
        """The worker tasks, for the app's lifetime."""
        tasks = [asyncio.create_task(self._work()) for _ in range(WORKERS)]
        yield
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _work(self) -> None:
        while True:
            await self.queue.get()
            # The handlers would run here.
            self.handled += 1
            self.queue.task_done()


MEMORY_PEER: Final = web.AppKey("memory_peer", MemoryPeer)
"""The memory peer's state, on the app it serves."""


def _sqlite_store(app: web.Application, path: Path) -> Store:
    db = sqlite3.connect(path, isolation_level=None)  # autocommit: one commit per statement
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute(_SCHEMA)

    async def store(key: str, body: bytes) -> bool:
        return db.execute(_INSERT, (key, body, time.time())).rowcount == 1

    async def close(_app: web.Application) -> None:
        db.close()

    app.on_cleanup.append(close)
    return store


def _redis_store(app: web.Application, url: str, prefix: str) -> Store:
    import redis.asyncio

    # A bounded pool that queues callers, as the inbox's (32 sockets): the default pool raises
    # "Too many connections" once more requests than that wait at the same time.
    pool = redis.asyncio.BlockingConnectionPool.from_url(url, max_connections=POOL_SIZE)
    client: Any = redis.asyncio.Redis.from_pool(pool)
    stream = prefix + "events"
    script = client.register_script(REDIS_STORE)

    async def store(key: str, body: bytes) -> bool:
        keys = [prefix + "dedup:" + key, stream]
        return bool(await script(keys=keys, args=[body, DEDUP_RETENTION]))

    async def close(_app: web.Application) -> None:
        await client.aclose()

    app.on_cleanup.append(close)
    return store


async def _no_reset(_conn: Any) -> None:
    """The inbox's pool reset: nothing (no session state to reset)."""


@attrs.define(eq=False)
class _PostgresPeer:
    """The PostgreSQL peer: its pool (opened with the app) and its insert."""

    dsn: str
    schema: str
    pool: Any = None

    async def open(self, _app: web.Application) -> AsyncIterator[None]:
        import asyncpg

        self.pool = await asyncpg.create_pool(
            self.dsn,
            min_size=1,
            max_size=POSTGRES_POOL_SIZE,
            timeout=10.0,
            command_timeout=30.0,
            reset=_no_reset,
        )
        await self.pool.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
        await self.pool.execute(_POSTGRES_TABLE % {"schema": self.schema})
        yield
        await self.pool.close()

    async def store(self, key: str, body: bytes) -> bool:
        # The schema is the benchmark's own name (new_schema), not input.
        status: str = await self.pool.execute(
            f'INSERT INTO "{self.schema}".events (dedup_key, raw, received_at)'  # noqa: S608
            " VALUES ($1, $2, $3) ON CONFLICT (dedup_key) DO NOTHING",
            key,
            body,
            time.time(),
        )
        return status == "INSERT 0 1"


def add_peer(
    app: web.Application,
    peer: str,
    *,
    token: str,
    workdir: Path,
    place: str,
    namespace: str,
) -> None:
    """Route ``POST /hooks/<token>`` on ``app`` to ``peer`` (one of :data:`PEERS`), on its
    store's ``place`` (Redis URL, PostgreSQL DSN) under ``namespace`` (prefix, schema)."""
    if peer == "bare":
        app.router.add_post(f"/hooks/{token}", _bare)
        return
    store: Store
    if peer == "memory-peer":
        memory = app[MEMORY_PEER] = MemoryPeer()
        app.cleanup_ctx.append(memory.workers)
        store = memory.store
    elif peer == "sqlite-peer":
        store = _sqlite_store(app, workdir / "peer.db")
    elif peer == "redis-peer":
        store = _redis_store(app, place, namespace)
    elif peer == "postgres-peer":
        postgres = _PostgresPeer(place, namespace)
        app.cleanup_ctx.append(postgres.open)
        store = postgres.store
    else:
        raise ValueError(f"unknown peer {peer!r}; choose from {', '.join(PEERS)}")
    app.router.add_post("/hooks/{token}", _guarded(token, store))
