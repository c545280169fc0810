"""A rolling restart under load loses nothing and runs each handler once; a handler that overruns
``drain_timeout`` is cancelled at shutdown and run again at once by the node still up.

Two receiver processes (``shared_node.py``) share one inbox, on the shared Redis (a prefix of the
test's own) or PostgreSQL (a schema of the test's own).  A sender posts a bounded load to both,
retrying every non-2xx and every failed connection, as the service does; one node gets SIGTERM
and is started again, a few times, while it is under load.  What a sender may see meanwhile: a
2xx once its delivery is stored, ``503`` with ``Retry-After``, or a failed connection (aiohttp's
runner closes the listening socket first); nothing else.  Events whose status is ``failed``
also have an ``atomic=True`` handler, whose effect is counted in the store.
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from node_cluster import TOKEN, Node, scrape, start_node, stop_node
from whtools import JSON, encode, eventually, payload

from webhooks import Inbox, PostgresInbox, RedisInbox

# Nodes stopped under a load of the test's own, their drains timed: run after the parallel
# suite, two at a time (under its load a node was twice seen still running 30 s after SIGTERM,
# which stop_node now reports with the node's tasks).
pytestmark = pytest.mark.quiet

EVENTS = 150
SENDERS = 6
PACE = 0.2
"""Seconds each sender waits between its events: the load lasts about five seconds."""
RESTARTS = 3
CLAIM_TIMEOUT = 30.0
"""Longer than the test: an entry that runs twice was handed back, never taken over."""
DRAIN_TIMEOUT = 5.0
OVERRUN_DRAIN = 1.0


def status_of(n: int) -> str:
    return "failed" if n % 4 == 0 else "done"


def runs_of(path: Path) -> Counter[str]:
    return Counter(path.read_text().split()) if path.exists() else Counter()


@pytest.fixture(
    params=[
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
def store(request: pytest.FixtureRequest) -> tuple[str, str, str]:
    """The backend, its URL, and a prefix or schema of the test's own."""
    if request.param == "redis":
        where = "redis_url", "redis_prefix"
    else:
        where = "postgres_dsn", "postgres_schema"
    url, namespace = (request.getfixturevalue(name) for name in where)
    return request.param, url, namespace


@asynccontextmanager
async def shared_store(
    backend: str, url: str, where: str
) -> AsyncIterator[tuple[Inbox, Callable[[], Awaitable[dict[str, int]]]]]:
    """An inbox on the store, and the atomic effects counted there."""
    if backend == "redis":
        import redis.asyncio

        client = redis.asyncio.Redis.from_url(url, decode_responses=True)
        inbox: Inbox = RedisInbox(url, prefix=where)

        async def redis_effects() -> dict[str, int]:
            found = await client.hgetall(f"{where}test:effects")
            return {str(key): int(value) for key, value in found.items()}

        try:
            yield inbox, redis_effects
        finally:
            await inbox.close()
            await client.aclose()
        return

    import asyncpg

    conn = await asyncpg.connect(url)
    await conn.execute(f'CREATE SCHEMA "{where}"')
    await conn.execute(f'CREATE TABLE "{where}".effects (process_id text PRIMARY KEY, n int)')
    inbox = PostgresInbox(url, schema=where)

    async def postgres_effects() -> dict[str, int]:
        rows = await conn.fetch(f'SELECT process_id, n FROM "{where}".effects')
        return {row["process_id"]: row["n"] for row in rows}

    try:
        yield inbox, postgres_effects
    finally:
        await inbox.close()
        await conn.close()


async def test_sigterm_under_load_loses_nothing_and_runs_each_handler_once(
    store: tuple[str, str, str], tmp_path: Path
) -> None:
    backend, url, where = store
    runs = tmp_path / "runs.txt"
    async with shared_store(backend, url, where) as (inbox, effects):

        async def start(name: str) -> Node:
            return await start_node(
                backend,
                url,
                where,
                name,
                runs,
                claim_timeout=CLAIM_TIMEOUT,
                drain_timeout=DRAIN_TIMEOUT,
            )

        nodes = {"steady": await start("steady"), "restarted": await start("restarted-0")}
        seen: Counter[str] = Counter()
        accepted = 0
        queue: asyncio.Queue[int] = asyncio.Queue()
        for n in range(EVENTS):
            queue.put_nowait(n)

        async def deliver(session: aiohttp.ClientSession, n: int) -> None:
            body = encode(payload(f"p-{n}", status=status_of(n)))
            while True:
                node = random.choice(list(nodes.values()))
                try:
                    async with session.post(node.hook_url, data=body, headers=JSON) as response:
                        if response.status == 503:
                            assert response.headers["Retry-After"] == "5"
                        seen[str(response.status)] += 1
                        if response.status < 300:
                            return
                except (aiohttp.ClientConnectionError, TimeoutError):
                    seen["connection failed"] += 1
                await asyncio.sleep(0.05)

        async def sender(session: aiohttp.ClientSession) -> None:
            nonlocal accepted
            while not queue.empty():
                await deliver(session, queue.get_nowait())
                accepted += 1
                await asyncio.sleep(PACE)

        async def restarter() -> None:
            for turn in range(1, RESTARTS + 1):
                while accepted < turn * EVENTS // (RESTARTS + 1):  # noqa: ASYNC110 - counted by the senders
                    await asyncio.sleep(0.02)
                assert accepted < EVENTS, "the load ended before this restart"
                node = nodes["restarted"]
                node.process.send_signal(signal.SIGTERM)
                began = time.monotonic()
                assert await node.process.wait() == 0
                # Handlers of 20 ms: the drain ends long before drain_timeout.
                assert time.monotonic() - began < DRAIN_TIMEOUT
                nodes["restarted"] = await start(f"restarted-{turn}")

        try:
            timeout = aiohttp.ClientTimeout(total=10)
            async with aiohttp.ClientSession(timeout=timeout) as session:
                async with asyncio.timeout(60):  # a guard against a hang, not a speed requirement
                    await asyncio.gather(restarter(), *(sender(session) for _ in range(SENDERS)))

            expected = {f"p-{n}" for n in range(EVENTS)}

            left: dict[str, object] = {}

            async def settled() -> bool:
                left["not run"] = sorted(expected - set(runs_of(runs)))
                left["unfinished"] = await inbox.pending_count()
                return not left["not run"] and left["unfinished"] == 0

            # Within CLAIM_TIMEOUT: an entry a stopped node left claimed would still wait.
            try:
                await eventually(settled, "every event handled and acked", limit=15, step=0.1)
            except AssertionError as exc:  # what was left, and what the senders saw
                raise AssertionError(f"{exc}: {left}; answers {dict(seen)}") from None
            await asyncio.sleep(0.5)  # an entry run twice would show by now: it is handed back
        finally:
            for node in nodes.values():
                await stop_node(node)

        counts = runs_of(runs)
        assert set(counts) == expected
        assert {pid: n for pid, n in counts.items() if n != 1} == {}
        atomic = {f"p-{n}" for n in range(EVENTS) if status_of(n) == "failed"}
        assert await effects() == dict.fromkeys(atomic, 1)
        assert set(seen) <= {"200", "503", "connection failed"}, seen


async def test_a_delivery_whose_body_is_arriving_at_sigterm_gets_503_and_its_retry_is_stored(
    store: tuple[str, str, str], tmp_path: Path
) -> None:
    """aiohttp reads nothing more on a connection it closes at shutdown, so a delivery whose
    body is still arriving when the node gets SIGTERM cannot be read to its end: it gets ``503``
    with ``Retry-After`` once ``read_timeout`` has passed (the node waits for it before its
    drain ends), nothing of it stored, and the sender's retry to the other node is stored and
    handled once."""
    backend, url, where = store
    runs = tmp_path / "runs.txt"
    body = encode(payload("p-in-flight"))
    head = (
        f"POST /hooks/{TOKEN} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    half = len(body) // 2
    async with shared_store(backend, url, where) as (inbox, _):
        nodes = [
            await start_node(backend, url, where, name, runs, claim_timeout=CLAIM_TIMEOUT)
            for name in ("stopped", "steady")
        ]
        stopped, steady = nodes
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", stopped.port)
            writer.write(head + body[:half])
            await writer.drain()
            await asyncio.sleep(0.2)  # the request is being handled: its body is awaited
            stopped.process.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.3)
            assert stopped.process.returncode is None  # shutting down: it waits for the request
            writer.write(body[half:])  # what aiohttp no longer reads
            await writer.drain()
            async with asyncio.timeout(10):  # a guard against a hang, not a speed requirement
                answer = await reader.read()  # the server closes the connection after it
            writer.close()
            head_lines = answer.partition(b"\r\n\r\n")[0].split(b"\r\n")
            assert head_lines[0] == b"HTTP/1.1 503 Service Unavailable"
            assert b"Retry-After: 5" in head_lines
            assert await stopped.process.wait() == 0
            assert await inbox.pending_count() == 0  # nothing of it was stored

            async with (
                aiohttp.ClientSession() as session,
                session.post(steady.hook_url, data=body, headers=JSON) as response,
            ):
                assert await response.json() == {"status": "accepted"}

            async def settled() -> bool:
                return "p-in-flight" in runs_of(runs) and await inbox.pending_count() == 0

            await eventually(settled, "the event handled and acked", limit=10, step=0.05)
            await asyncio.sleep(0.3)
        finally:
            for node in nodes:
                await stop_node(node)
        assert runs_of(runs) == Counter({"p-in-flight": 1})


async def test_a_handler_past_drain_timeout_is_cancelled_and_run_again_at_once(
    store: tuple[str, str, str], tmp_path: Path
) -> None:
    """The node stopped exits within ``drain_timeout`` and a little, its listener closed from
    the start of its drain (probes and deliveries find none); the entries its handlers held are
    due again at once (not after ``CLAIM_TIMEOUT``), and the node still up runs each
    once more: plain handlers run again, atomic writes of the cancelled run never applied."""
    backend, url, where = store
    runs = tmp_path / "runs.txt"
    events = [f"p-{n}" for n in range(4)]  # as many as the node's workers
    async with shared_store(backend, url, where) as (inbox, effects):
        overrunning = await start_node(
            backend,
            url,
            where,
            "overrunning",
            runs,
            claim_timeout=CLAIM_TIMEOUT,
            drain_timeout=OVERRUN_DRAIN,
            mode="overrun",
        )
        heir: Node | None = None
        try:
            async with aiohttp.ClientSession() as session:
                for n, pid in enumerate(events):
                    body = encode(payload(pid, status=status_of(n)))
                    async with session.post(overrunning.hook_url, data=body, headers=JSON) as r:
                        assert r.status == 200

            async def all_running() -> bool:
                return (await scrape(overrunning)).get("webhooks_in_flight") == len(events)

            await eventually(all_running, "the node to run every event", limit=10, step=0.05)
            heir = await start_node(backend, url, where, "heir", runs, claim_timeout=CLAIM_TIMEOUT)
            assert runs_of(runs) == Counter()  # the heir cannot take what the other holds

            base = f"http://127.0.0.1:{overrunning.port}/hooks"
            async with aiohttp.ClientSession() as session:
                for route in ("ready", "live"):
                    async with session.get(f"{base}/{route}") as response:
                        assert response.status == 200
                overrunning.process.send_signal(signal.SIGTERM)
                began = time.monotonic()
                await asyncio.sleep(0.3)
                # Draining: aiohttp's runner closed the listening socket first, so a probe and a
                # delivery find no listener (the sender retries: the heir gets it).
                with pytest.raises(aiohttp.ClientConnectorError):
                    await session.get(f"{base}/ready")
                with pytest.raises(aiohttp.ClientConnectorError):
                    await session.post(overrunning.hook_url, data=b"{}", headers=JSON)
                assert overrunning.process.returncode is None  # still draining
            assert await overrunning.process.wait() == 0
            assert time.monotonic() - began < OVERRUN_DRAIN + 3.0

            async def settled() -> bool:
                return set(runs_of(runs)) == set(events) and await inbox.pending_count() == 0

            # Well before CLAIM_TIMEOUT: the entries were handed back, not left to lapse.
            await eventually(settled, "the heir to run every event", limit=10, step=0.05)
            await asyncio.sleep(0.5)
        finally:
            await stop_node(overrunning)
            if heir is not None:
                await stop_node(heir)
        assert runs_of(runs) == Counter(dict.fromkeys(events, 1))
        failed = {pid for n, pid in enumerate(events) if status_of(n) == "failed"}
        assert await effects() == dict.fromkeys(failed, 1)
