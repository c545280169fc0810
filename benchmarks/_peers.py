"""The handlers the receiver is measured against: what a user would write by hand instead.

* ``bare``: read the body, ``json.loads`` it, answer 200.  No token, no storage: the floor of an
  aiohttp handler, and the reference line of every req/s ratio.
* ``sqlite-peer``: the token check, ``json.loads``, one ``INSERT ... ON CONFLICT (dedup_key) DO
  NOTHING`` of the body into a SQLite file, committed before the answer.  The file has the
  settings of :class:`~webhooks.SQLiteInbox` (WAL, ``synchronous=FULL``), so each answer is as
  durable as the receiver's.  The statement runs on the event loop, one commit per request: the
  plainest code that is correct, and the cheapest in CPU (no thread, no queue).
* ``redis-peer``: the token check, ``json.loads``, ``SET NX`` of the dedup key (with the inbox's
  retention), and ``XADD`` of the body to a stream when the key was new, with redis-py's asyncio
  client on a blocking pool of the inbox's size (hiredis parses its replies when installed, as
  for the inbox).

Every peer keys an event as the receiver does: by (event, process_id, status).
"""

from __future__ import annotations

import hmac
import json
import sqlite3
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

from aiohttp import web

PEERS: Final = ("bare", "sqlite-peer", "redis-peer")
DEDUP_RETENTION: Final = 7 * 24 * 3600
"""Seconds a dedup key is kept: the inbox's default retention."""
POOL_SIZE: Final = 32
"""Redis connections at most, as the inbox's client."""

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

Handler = Callable[[web.Request], Awaitable[web.Response]]


async def _bare(request: web.Request) -> web.Response:
    body = await request.read()
    event = json.loads(body)
    if not isinstance(event, dict) or "process_id" not in event:
        return web.json_response({"error": "not an event"}, status=400)
    return web.json_response({"status": "accepted"})


def _guarded(token: str, store: Callable[[str, bytes], Awaitable[bool]]) -> Handler:
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


def _sqlite_store(app: web.Application, path: Path) -> Callable[[str, bytes], Awaitable[bool]]:
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


def _redis_store(
    app: web.Application, url: str, prefix: str
) -> Callable[[str, bytes], Awaitable[bool]]:
    import redis.asyncio

    # A bounded pool that queues callers, as the inbox's (32 sockets): the default pool raises
    # "Too many connections" once more requests than that wait at the same time.
    pool = redis.asyncio.BlockingConnectionPool.from_url(url, max_connections=POOL_SIZE)
    client: Any = redis.asyncio.Redis.from_pool(pool)
    stream = prefix + "events"

    async def store(key: str, body: bytes) -> bool:
        if not await client.set(prefix + "dedup:" + key, b"1", nx=True, ex=DEDUP_RETENTION):
            return False
        await client.xadd(stream, {"raw": body})
        return True

    async def close(_app: web.Application) -> None:
        await client.aclose()

    app.on_cleanup.append(close)
    return store


def add_peer(
    app: web.Application, peer: str, *, token: str, workdir: Path, redis_url: str, prefix: str
) -> None:
    """Route ``POST /hooks/<token>`` on ``app`` to ``peer`` (one of :data:`PEERS`)."""
    if peer == "bare":
        app.router.add_post(f"/hooks/{token}", _bare)
    elif peer == "sqlite-peer":
        store = _sqlite_store(app, workdir / "peer.db")
        app.router.add_post("/hooks/{token}", _guarded(token, store))
    elif peer == "redis-peer":
        store = _redis_store(app, redis_url, prefix)
        app.router.add_post("/hooks/{token}", _guarded(token, store))
    else:
        raise ValueError(f"unknown peer {peer!r}; choose from {', '.join(PEERS)}")
