"""``python -m benchmarks.postgres_puts [DSN]``: what batching PostgresInbox puts buys (a DSN
through PgBouncer, ``...?pooler=transaction``, measures both through it).

64 coroutines put 4000 distinct events at once.  ``batched`` is :class:`webhooks.PostgresInbox`
(the puts that arrive together share one statement and one commit); ``one by one`` runs the same
insert, one statement and one commit per put, on a pool of as many connections as the inbox has
(16), which is how the inbox put before batching.  Each runs in a schema of its own, dropped after.
"""

from __future__ import annotations

import asyncio
import sys
import time
import urllib.parse
import uuid
from collections.abc import Awaitable, Callable

import asyncpg

from asyncsdk._models import ProcessCompleted, ResultAsset
from webhooks import PostgresInbox

DSN = "postgresql://postgres@127.0.0.1:5432/test"
EVENTS = 4000
CONCURRENCY = 64


def _event(n: int) -> ProcessCompleted:
    return ProcessCompleted(
        event="process.completed",
        process_id=f"p-{n}",
        order_id="o-1",
        tool="tool-virtual-staging",
        status="done",
        final_assets=(ResultAsset(asset_id="a-1", src="https://cdn.example/a.jpg"),),
    )


async def _measure(name: str, put: Callable[[int], Awaitable[object]]) -> None:
    gate = asyncio.Semaphore(CONCURRENCY)
    took: list[float] = []

    async def one(n: int) -> None:
        async with gate:
            started = time.perf_counter()
            await put(n)
            took.append(time.perf_counter() - started)

    await put(-1)  # connect and create the schema first
    started = time.perf_counter()
    await asyncio.gather(*(one(n) for n in range(EVENTS)))
    elapsed = time.perf_counter() - started
    took.sort()
    print(
        f"{name:11} {EVENTS / elapsed:7.0f} puts/s   p50 {took[len(took) // 2] * 1e3:6.1f} ms"
        f"   p99 {took[int(len(took) * 0.99)] * 1e3:6.1f} ms"
    )


def _plain(dsn: str) -> tuple[str, dict[str, int]]:
    """``dsn`` as asyncpg takes it, and its options: the inbox's ``?pooler=`` is read by the
    package only; through a pooler in transaction mode, no prepared statement is kept."""
    parts = urllib.parse.urlsplit(dsn)
    query = urllib.parse.parse_qsl(parts.query)
    pooler = dict(query).get("pooler")
    kept = urllib.parse.urlencode([(k, v) for k, v in query if k != "pooler"])
    options = {"statement_cache_size": 0} if pooler == "transaction" else {}
    return urllib.parse.urlunsplit(parts._replace(query=kept)), options


async def main(dsn: str) -> None:
    schemas = [f"bench_{uuid.uuid4().hex[:16]}" for _ in range(2)]
    plain, options = _plain(dsn)
    admin = await asyncpg.connect(plain, **options)
    try:
        inbox = PostgresInbox(dsn, schema=schemas[0])
        try:
            await _measure("batched", lambda n: inbox.put(_event(n), b"{}"))
        finally:
            await inbox.close()

        table = f'"{schemas[1]}".inbox'
        await admin.execute(
            f'CREATE SCHEMA "{schemas[1]}"; CREATE TABLE {table}'
            " (id bigserial PRIMARY KEY, dedup_key text UNIQUE, event bytea, raw bytea)"
        )
        insert = (
            f"INSERT INTO {table} (dedup_key, event, raw) VALUES ($1, $2, $3)"  # noqa: S608
            " ON CONFLICT (dedup_key) DO NOTHING RETURNING id"
        )
        pool = await asyncpg.create_pool(plain, min_size=16, max_size=16, **options)
        try:
            await _measure("one by one", lambda n: pool.fetchval(insert, f"p-{n}", b"{}", b"{}"))
        finally:
            await pool.close()
    finally:
        for schema in schemas:
            await admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await admin.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else DSN))
