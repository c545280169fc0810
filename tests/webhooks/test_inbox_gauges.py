"""The shared inbox's gauges on a two-node inbox match ``asyncsdk inbox stats`` within seconds.

Two receiver processes (``shared_node.py``, metrics on) share one Redis or PostgreSQL inbox.
Their handlers hold every event until released, so the shared inbox keeps a depth neither node
holds alone.  ``webhooks_inbox_depth`` on each node then says what ``asyncsdk inbox stats`` says
(the store is read every 2 s), while ``webhooks_in_flight`` counts each node's own entries; a
dead letter replayed from the command line shows in both nodes' ``webhooks_inbox_replays_total``.
"""

from __future__ import annotations

import json
import random
import signal
from pathlib import Path

import aiohttp
import pytest
from inbox_contract import event
from node_cluster import Node, cli, scrape, start_node, stop_node
from whtools import JSON, encode, eventually, payload

from webhooks import PostgresInbox, RedisInbox
from webhooks.contract import InspectableInbox

EVENTS = 40
FOLLOW = 15.0
"""Seconds a test waits for the gauges to follow the store: a guard, read every 2 s."""


async def stats(store: list[str]) -> dict[str, int]:
    found: dict[str, int] = json.loads(await cli("inbox", "stats", *store, "--json"))
    return found


async def gauges_show(nodes: list[Node], **expected: float) -> bool:
    for node in nodes:
        found = await scrape(node)
        if any(found.get(name) != value for name, value in expected.items()):
            return False
    return True


async def check_gauges_follow_the_store(
    backend: str, url: str, where: str, store: list[str], inbox: InspectableInbox, tmp_path: Path
) -> None:
    # A dead letter, parked before the nodes start, to replay from the command line.
    assert await inbox.put(event("p-dead"), b"{}")
    (parked,) = await inbox.claim_batch("operator", 1)
    await inbox.dead_letter(parked.id, "gave up")

    runs = tmp_path / "runs.txt"
    nodes = [
        await start_node(backend, url, where, name, runs, claim_timeout=60.0, mode="hold")
        for name in "ab"
    ]
    try:
        async with aiohttp.ClientSession() as http:
            for n in range(EVENTS):
                body = encode(payload(f"p-{n}"))
                node = random.choice(nodes)
                async with http.post(node.hook_url, data=body, headers=JSON) as response:
                    assert response.status == 200

        before = await stats(store)
        assert (before["depth"], before["dead"], before["replayed"]) == (EVENTS, 1, 0)

        async def deep() -> bool:
            return await gauges_show(
                nodes,
                webhooks_inbox_depth=EVENTS,
                webhooks_inbox_dead_letters=1,
                webhooks_inbox_replays_total=0,
            )

        await eventually(deep, "both nodes' gauges to show the shared depth", FOLLOW, 0.2)
        # Each node holds (runs, or keeps in reserve) only part of it.
        held = [(await scrape(node))["webhooks_in_flight"] for node in nodes]
        assert 0 < sum(held) < EVENTS

        assert await cli("inbox", "replay", *store, parked.id) == f"replayed {parked.id}\n"
        after = await stats(store)
        assert (after["depth"], after["dead"], after["replayed"]) == (EVENTS + 1, 0, 1)

        async def replayed() -> bool:
            return await gauges_show(
                nodes,
                webhooks_inbox_depth=EVENTS + 1,
                webhooks_inbox_dead_letters=0,
                webhooks_inbox_replays_total=1,
            )

        await eventually(replayed, "both nodes' gauges to count the replay", FOLLOW, 0.2)

        for node in nodes:
            node.process.send_signal(signal.SIGUSR1)  # the handlers finish

        async def empty() -> bool:
            return (await stats(store))["depth"] == 0 and await gauges_show(
                nodes, webhooks_inbox_depth=0, webhooks_in_flight=0
            )

        await eventually(empty, "the shared inbox to empty, and the gauges to say so", 30, 0.2)
    finally:
        for node in nodes:
            await stop_node(node)
    assert sorted(runs.read_text().split()) == sorted(
        ["p-dead", *(f"p-{n}" for n in range(EVENTS))]
    )


@pytest.mark.redis
async def test_redis_depth_gauge_matches_inbox_stats(
    redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    inbox = RedisInbox(redis_url, prefix=redis_prefix)
    store = ["--redis", redis_url, "--prefix", redis_prefix]
    try:
        await check_gauges_follow_the_store(
            "redis", redis_url, redis_prefix, store, inbox, tmp_path
        )
    finally:
        await inbox.close()


@pytest.mark.postgres
async def test_postgres_depth_gauge_matches_inbox_stats(
    postgres_dsn: str, postgres_schema: str, tmp_path: Path
) -> None:
    inbox = PostgresInbox(postgres_dsn, schema=postgres_schema)
    store = ["--postgres", postgres_dsn, "--schema", postgres_schema]
    try:
        await check_gauges_follow_the_store(
            "postgres", postgres_dsn, postgres_schema, store, inbox, tmp_path
        )
    finally:
        await inbox.close()
