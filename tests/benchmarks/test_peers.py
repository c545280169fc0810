"""The hand-written handlers the receiver's CPU per request is held against do the durable work
they claim: the token check, one stored copy per dedup key, answered before the 200.

They are the benchmarks' own code (``benchmarks._peers``), not the package's: there is no public
name to test them through, hence the private import.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from benchmarks._peers import DEDUP_RETENTION, MEMORY_PEER, add_peer
from benchmarks._receiver_bench import TOKEN, body_for


@contextlib.asynccontextmanager
async def _serve(app: web.Application) -> AsyncIterator[str]:
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url(""))
    finally:
        await server.close()


async def _post(session: aiohttp.ClientSession, url: str, body: bytes) -> tuple[int, Any]:
    async with session.post(url, data=body) as response:
        return response.status, json.loads(await response.read())


async def _deliver_twice_and_forge(base: str) -> list[tuple[int, Any]]:
    body = body_for("proc-peer-1")
    async with aiohttp.ClientSession() as session:
        return [
            await _post(session, f"{base}/hooks/{TOKEN}", body),
            await _post(session, f"{base}/hooks/{TOKEN}", body),
            await _post(session, f"{base}/hooks/not-the-token", body_for("proc-peer-2")),
        ]


EXPECTED = [
    (200, {"status": "accepted"}),
    (200, {"status": "duplicate"}),
    (401, {"error": "unknown token"}),
]


async def test_the_memory_peer_queues_each_event_once_for_its_workers(tmp_path: Path) -> None:
    app = web.Application()
    add_peer(app, "memory-peer", token=TOKEN, workdir=tmp_path, place="", namespace="")
    peer = app[MEMORY_PEER]
    async with _serve(app) as base:
        assert await _deliver_twice_and_forge(base) == EXPECTED
        await peer.queue.join()  # the workers took what was queued
        assert peer.handled == 1
    assert list(peer.seen) == ["process.completed:proc-peer-1:done"]


async def test_the_sqlite_peer_stores_each_event_once_in_a_wal_file(tmp_path: Path) -> None:
    app = web.Application()
    add_peer(app, "sqlite-peer", token=TOKEN, workdir=tmp_path, place="", namespace="")
    async with _serve(app) as base:
        assert await _deliver_twice_and_forge(base) == EXPECTED
    db = sqlite3.connect(tmp_path / "peer.db")
    try:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        rows = db.execute("SELECT dedup_key, raw FROM events").fetchall()
    finally:
        db.close()
    assert rows == [("process.completed:proc-peer-1:done", body_for("proc-peer-1"))]


@pytest.mark.redis
async def test_the_redis_peer_claims_the_key_and_streams_the_event_once(
    tmp_path: Path, redis_url: str, redis_prefix: str, raw_redis: Any
) -> None:
    app = web.Application()
    add_peer(
        app, "redis-peer", token=TOKEN, workdir=tmp_path, place=redis_url, namespace=redis_prefix
    )
    async with _serve(app) as base:
        assert await _deliver_twice_and_forge(base) == EXPECTED
    entries = await raw_redis.xrange(redis_prefix + "events")
    assert [fields for _, fields in entries] == [{b"raw": body_for("proc-peer-1")}]
    ttl = await raw_redis.ttl(redis_prefix + "dedup:process.completed:proc-peer-1:done")
    assert DEDUP_RETENTION - 60 < ttl <= DEDUP_RETENTION


@pytest.mark.postgres
async def test_the_postgres_peer_inserts_each_event_once(
    tmp_path: Path, postgres_dsn: str, postgres_schema: str
) -> None:
    import asyncpg

    app = web.Application()
    add_peer(
        app,
        "postgres-peer",
        token=TOKEN,
        workdir=tmp_path,
        place=postgres_dsn,
        namespace=postgres_schema,
    )
    async with _serve(app) as base:
        assert await _deliver_twice_and_forge(base) == EXPECTED
    conn = await asyncpg.connect(postgres_dsn)
    try:
        rows = await conn.fetch(f'SELECT dedup_key, raw FROM "{postgres_schema}".events')
    finally:
        await conn.close()
    assert [tuple(row) for row in rows] == [
        ("process.completed:proc-peer-1:done", body_for("proc-peer-1"))
    ]
