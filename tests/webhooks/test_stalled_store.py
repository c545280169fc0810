"""A store frozen for 15 s under load: every plain handler runs once, nothing is lost.

Two receiver processes (``shared_node.py``) share one inbox on a Redis or PostgreSQL server of
this test's own (``own_servers.py``), which the test stops with SIGSTOP for 15 s in the middle of
a burst, as a host that stalls would, then lets go on.  Senders retry every non-2xx and every
failed connection, as the service does, against either node.  Acks and claim renewals that fail
meanwhile are tried again while the claims are held (``claim_timeout`` 30 s: claims, renewed
every 10 s, outlive a stall of up to 19.5 s): no entry is handed to the other node to run
again.  Events whose
status is ``failed`` also have an ``atomic=True`` handler, whose effect is counted in the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest
from node_cluster import Node, start_node, stop_node
from own_servers import OwnServer, own_postgres, own_redis
from whtools import JSON, encode, eventually, payload

pytestmark = pytest.mark.slow

EVENTS = 240
FREEZE_AFTER = 80
"""Events accepted before the store is frozen: handlers and acks are under way by then."""
FREEZE_SECONDS = 15.0
CLAIM_TIMEOUT = 30.0
SENDERS = 24
SCHEMA = "stall"


def status_of(n: int) -> str:
    return "failed" if n % 4 == 0 else "done"


async def deliver(session: aiohttp.ClientSession, nodes: list[Node], n: int) -> None:
    """Send event ``n`` to random nodes until one answers 2xx, as the service retries."""
    body = encode(payload(f"p-{n}", status=status_of(n)))
    while True:
        node = random.choice(nodes)
        try:
            async with session.post(node.hook_url, data=body, headers=JSON) as response:
                if response.status < 300:
                    return
        except (aiohttp.ClientError, TimeoutError):
            pass
        await asyncio.sleep(0.2)


async def burst_with_a_freeze(nodes: list[Node], server: OwnServer) -> None:
    """Deliver every event, freezing the store for ``FREEZE_SECONDS`` once ``FREEZE_AFTER``
    were accepted; senders keep sending meanwhile."""
    accepted = 0
    frozen = asyncio.Event()
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(EVENTS):
        queue.put_nowait(n)
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(timeout=timeout) as session:

        async def sender() -> None:
            nonlocal accepted
            while not queue.empty():
                await deliver(session, nodes, queue.get_nowait())
                accepted += 1
                if accepted == FREEZE_AFTER:
                    frozen.set()

        async def freezer() -> None:
            await frozen.wait()
            server.freeze()
            await asyncio.sleep(FREEZE_SECONDS)
            server.thaw()

        await asyncio.gather(freezer(), *(sender() for _ in range(SENDERS)))


def runs_of(path: Path) -> Counter[str]:
    return Counter(path.read_text().split()) if path.exists() else Counter()


async def check_each_ran_once(
    runs: Path,
    effects: Callable[[], Awaitable[dict[str, int]]],
    depth: Callable[[], Awaitable[int]],
) -> None:
    expected = {f"p-{n}" for n in range(EVENTS)}
    atomic = {f"p-{n}" for n in range(EVENTS) if status_of(n) == "failed"}

    async def settled() -> bool:
        return set(runs_of(runs)) == expected and await depth() == 0

    await eventually(settled, "every event handled and acked", limit=60)
    # An entry whose ack had been dropped would come back once its claim lapsed
    # (CLAIM_TIMEOUT after the stall at the latest) and run on the other node.
    await asyncio.sleep(1.0)
    counts = runs_of(runs)
    twice = {pid: n for pid, n in counts.items() if n != 1}
    assert not twice, f"plain handlers run more than once: {twice}"
    assert set(counts) == expected
    assert await effects() == dict.fromkeys(atomic, 1)


@pytest.fixture
async def redis_store() -> AsyncIterator[OwnServer]:
    with own_redis() as server:
        yield server


@pytest.fixture
async def postgres_store() -> AsyncIterator[OwnServer]:
    import asyncpg

    with own_postgres() as server:

        async def accepting() -> bool:
            try:
                conn = await asyncpg.connect(server.url, timeout=2)
            except (OSError, asyncpg.PostgresError):
                return False
            await conn.execute(f"CREATE SCHEMA {SCHEMA}")
            await conn.execute(
                f"CREATE TABLE {SCHEMA}.effects (process_id text PRIMARY KEY, n int)"
            )
            await conn.close()
            return True

        await eventually(accepting, "the server to accept connections", limit=30, step=0.1)
        yield server


@contextlib.asynccontextmanager
async def frozen_mid_burst(
    backend: str, server: OwnServer, where: str, tmp_path: Path
) -> AsyncIterator[None]:
    runs = tmp_path / "runs.txt"
    nodes = [
        await start_node(backend, server.url, where, name, runs, claim_timeout=CLAIM_TIMEOUT)
        for name in "ab"
    ]
    try:
        await burst_with_a_freeze(nodes, server)
        yield
    finally:
        for node in nodes:
            await stop_node(node)


async def test_redis_frozen_for_15_s_runs_each_plain_handler_once(
    redis_store: OwnServer, tmp_path: Path
) -> None:
    import redis.asyncio

    from webhooks import RedisInbox

    prefix = f"stall:{uuid.uuid4().hex[:8]}:"
    client = redis.asyncio.Redis.from_url(redis_store.url, decode_responses=True)
    inbox = RedisInbox(redis_store.url, prefix=prefix)
    try:
        async with frozen_mid_burst("redis", redis_store, prefix, tmp_path):

            async def effects() -> dict[str, int]:
                found = await client.hgetall(f"{prefix}test:effects")
                return {str(key): int(value) for key, value in found.items()}

            await check_each_ran_once(tmp_path / "runs.txt", effects, inbox.pending_count)
    finally:
        await inbox.close()
        await client.aclose()


async def test_postgres_frozen_for_15_s_runs_each_plain_handler_once(
    postgres_store: OwnServer, tmp_path: Path
) -> None:
    import asyncpg

    from webhooks import PostgresInbox

    schema = SCHEMA
    inbox = PostgresInbox(postgres_store.url, schema=schema)
    try:
        async with frozen_mid_burst("postgres", postgres_store, schema, tmp_path):

            async def effects() -> dict[str, int]:
                conn = await asyncpg.connect(postgres_store.url)
                try:
                    rows = await conn.fetch(f"SELECT process_id, n FROM {SCHEMA}.effects")
                finally:
                    await conn.close()
                return {row["process_id"]: row["n"] for row in rows}

            await check_each_ran_once(tmp_path / "runs.txt", effects, inbox.pending_count)
    finally:
        await inbox.close()
