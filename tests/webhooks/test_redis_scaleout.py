"""Three receiver processes on one Redis behind a load balancer: backpressure, spread, takeover.

The processes are those of ``test_redis_multi_instance`` (``redis_node.py``).  A refused delivery
is sent again once the inbox has drained, as a webhook sender retrying later would.
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
    redis_url: str, redis_prefix: str, raw_redis: redis.asyncio.Redis, burst_nodes: dict[str, Node]
) -> None:
    # More than the three nodes can take even if each accepted a full inbox on its own estimate,
    # plus every delivery in flight meanwhile (the connector's 100): refusals are certain.
    events = 4 * BURST_LIMIT
    rng = random.Random(7)
    gate = f"{redis_prefix}test:open"
    refused_at: list[int] = []  # the shared inbox's depth, read right after each 503
    refused_per_round: list[int] = []
    inbox = RedisInbox(redis_url, prefix=redis_prefix)

    async def send(http: aiohttp.ClientSession, pid: str) -> bool:
        node = rng.choice(list(burst_nodes.values()))
        async with http.post(node.hook_url, json=payload(pid, 0)) as response:
            if response.status == 200:
                return True
            assert response.status == 503, await response.text()
            assert response.headers["Retry-After"] == "5"
            assert (await response.json())["error"] == "too many events waiting; retry later"
        refused_at.append(await inbox.pending_count())
        return False

    async def drained() -> bool:
        return await inbox.pending_count() == 0

    waiting = [f"burst-{n}" for n in range(events)]
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=100)) as http:
            # Each round, the handlers are held (the nodes' ``burst`` mode), so the shared inbox
            # only fills while every event not yet accepted is sent at once; then they are let
            # go and the inbox drains, as it does once a real burst has passed.
            while waiting and len(refused_per_round) < events // BURST_LIMIT:
                await raw_redis.delete(gate)
                accepted = await asyncio.gather(*(send(http, pid) for pid in waiting))
                waiting = [pid for pid, ok in zip(waiting, accepted, strict=True) if not ok]
                refused_per_round.append(len(waiting))
                await raw_redis.set(gate, 1)
                await eventually(drained, "the accepted events to be handled", limit=60)
        # A round that refused any accepted a full inbox (BURST_LIMIT) first, so every event got
        # in within events // BURST_LIMIT sends: none was refused while there was room...
        assert waiting == [], refused_per_round
        # ...backpressure did act...
        assert refused_per_round[0] > 0
        # ...and only while the shared inbox was full: its depth cannot fall while the handlers
        # are held, so the depth read after each refusal is at least the one it rested on.
        assert min(refused_at) >= BURST_LIMIT, sorted(refused_at)[:10]
        # Every event handled exactly once, whichever node stored or ran it.
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
