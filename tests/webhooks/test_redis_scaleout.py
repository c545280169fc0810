"""Three receiver processes on one Redis behind a load balancer: backpressure, spread, takeover.

The processes are those of ``test_redis_multi_instance`` (``redis_node.py``).  A sender retries a
refused delivery three times, one second apart, as an impatient webhook sender would.
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import pytest
import redis.asyncio
from redis_node import BURST_LIMIT, CLAIM_TIMEOUT
from test_redis_multi_instance import Node, claimed_by, payload, start_node, stop_node
from whtools import eventually

from webhooks import RedisInbox

pytestmark = [pytest.mark.redis, pytest.mark.slow]

RETRIES = 3


async def per_node(redis_url: str, prefix: str) -> dict[str, int]:
    """Handler runs by node name."""
    client = redis.asyncio.Redis.from_url(redis_url, decode_responses=True)
    try:
        return {k: int(v) for k, v in (await client.hgetall(f"{prefix}test:nodes")).items()}
    finally:
        await client.aclose()


async def start_nodes(
    redis_url: str, prefix: str, modes: dict[str, str]
) -> AsyncIterator[dict[str, Node]]:
    started = await asyncio.gather(
        *(start_node(redis_url, prefix, name, mode) for name, mode in modes.items())
    )
    try:
        yield {node.name: node for node in started}
    finally:
        for node in started:
            await stop_node(node)


def handled(redis_url: str, prefix: str, count: int) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return sum((await per_node(redis_url, prefix)).values()) >= count

    return probe


@pytest.fixture
async def burst_nodes(redis_url: str, redis_prefix: str) -> AsyncIterator[dict[str, Node]]:
    async for nodes in start_nodes(redis_url, redis_prefix, dict.fromkeys("012", "burst")):
        yield nodes


async def test_a_burst_is_refused_only_while_the_shared_inbox_is_full(
    redis_url: str, redis_prefix: str, burst_nodes: dict[str, Node]
) -> None:
    events = 3 * BURST_LIMIT
    rng = random.Random(7)
    refused_at: list[int] = []  # the shared inbox's depth, read right after each 503
    given_up: list[str] = []
    inbox = RedisInbox(redis_url, prefix=redis_prefix)

    async def send(http: aiohttp.ClientSession, pid: str) -> None:
        for attempt in range(1 + RETRIES):
            node = rng.choice(list(burst_nodes.values()))
            async with http.post(node.hook_url, json=payload(pid, 0)) as response:
                if response.status == 200:
                    return
                assert response.status == 503, await response.text()
                assert response.headers["Retry-After"] == "5"
                assert (await response.json())["error"] == "too many events waiting; retry later"
            refused_at.append(await inbox.pending_count())
            if attempt < RETRIES:
                await asyncio.sleep(1.0)
        given_up.append(pid)

    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=100)) as http:
            await asyncio.gather(*(send(http, f"burst-{n}") for n in range(events)))
        assert given_up == []  # no event refused on every try
        # The burst outran three nodes' handlers, so backpressure did act...
        assert refused_at
        # ...and only while the shared inbox was full.  (The depth is read after the answer, so
        # it may have fallen by what the handlers finished meanwhile: 12 workers, 50 ms each.)
        assert min(refused_at) >= BURST_LIMIT * 3 // 4, sorted(refused_at)[:10]

        async def drained() -> bool:
            return await inbox.pending_count() == 0

        await eventually(drained, "the burst to be handled", limit=60)
        assert sum((await per_node(redis_url, redis_prefix)).values()) == events
    finally:
        await inbox.close()


@pytest.fixture
async def slow_nodes(redis_url: str, redis_prefix: str) -> AsyncIterator[dict[str, Node]]:
    async for nodes in start_nodes(redis_url, redis_prefix, dict.fromkeys("012", "slow")):
        yield nodes


async def test_slow_handlers_spread_over_every_node(
    redis_url: str, redis_prefix: str, slow_nodes: dict[str, Node]
) -> None:
    events = 90
    # Every delivery reaches the same node: the others must still take their share.
    first = slow_nodes["0"]
    async with aiohttp.ClientSession() as http:
        for n in range(events):
            async with http.post(first.hook_url, json=payload(f"slow-{n}", 0)) as response:
                assert response.status == 200
    await eventually(handled(redis_url, redis_prefix, events), "every handler run", limit=60)
    runs = await per_node(redis_url, redis_prefix)
    assert sum(runs.values()) == events
    assert all(runs.get(name, 0) >= events // 5 for name in "012"), runs


@pytest.fixture
async def doomed_nodes(redis_url: str, redis_prefix: str) -> AsyncIterator[dict[str, Node]]:
    modes = {"0": "slow", "1": "slow", "2": "stall"}
    async for nodes in start_nodes(redis_url, redis_prefix, modes):
        yield nodes


async def test_a_dead_nodes_entries_are_taken_over_within_the_claim_timeout(
    redis_url: str, redis_prefix: str, doomed_nodes: dict[str, Node]
) -> None:
    stalled = doomed_nodes["2"]
    async with aiohttp.ClientSession() as http:
        for n in range(30):
            async with http.post(stalled.hook_url, json=payload(f"dead-{n}", 0)) as response:
                assert response.status == 200
    async with asyncio.timeout(30):  # a guard against a hang, not a speed requirement
        while not await claimed_by(redis_url, redis_prefix, "node-2"):  # noqa: ASYNC110
            await asyncio.sleep(0.02)
    held = await claimed_by(redis_url, redis_prefix, "node-2")
    assert await stop_node(stalled, signal.SIGKILL) == -signal.SIGKILL
    killed = time.monotonic()
    async with asyncio.timeout(30):  # a guard against a hang, not a speed requirement
        while await claimed_by(redis_url, redis_prefix, "node-2"):  # noqa: ASYNC110
            await asyncio.sleep(0.02)
    taken_over = time.monotonic() - killed
    # Within the claim timeout, plus the survivors' next claim (they poll every 50 ms) and the
    # scheduling of a loaded test machine.
    assert taken_over <= CLAIM_TIMEOUT + 0.5, (taken_over, held)
    await eventually(handled(redis_url, redis_prefix, 30), "every handler run", limit=60)
    assert set(await per_node(redis_url, redis_prefix)) == {"0", "1"}
