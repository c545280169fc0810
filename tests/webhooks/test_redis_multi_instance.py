"""Three receiver processes on one Redis: duplicates, a SIGKILL mid-run, a restart; nothing lost.

Each process (``redis_node.py``) mounts the receiver on a shared :class:`RedisInbox` and
:class:`RedisRegistry`.  Every event is delivered three times to random live processes, as a load
balancer in front of them would; waiters sit on other processes than the one receiving.  One
process is killed with SIGKILL while deliveries and handlers run, then started again.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import attrs
import pytest
import redis.asyncio
from node_process import start_node_process

from asyncsdk import ProcessCompleted, structure
from webhooks import RedisInbox

pytestmark = [pytest.mark.redis, pytest.mark.slow]

NODE_SCRIPT = Path(__file__).with_name("redis_node.py")
TOKEN = "multi-" + "k3y5" * 8
EVENTS = 120
COPIES = 3


@attrs.define
class Node:
    name: str
    process: asyncio.subprocess.Process
    port: int

    @property
    def hook_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/{TOKEN}"

    def wait_url(self, process_id: str) -> str:
        return f"http://127.0.0.1:{self.port}/wait/{process_id}?timeout=40"


async def start_node(redis_url: str, prefix: str, name: str, mode: str = "") -> Node:
    process, port = await start_node_process(
        NODE_SCRIPT, redis_url, prefix, TOKEN, name, mode, name=name
    )
    return Node(name, process, port)


async def stop_node(node: Node, sig: int = signal.SIGTERM) -> int:
    if node.process.returncode is None:
        node.process.send_signal(sig)
    await node.process.communicate()
    assert node.process.returncode is not None
    return node.process.returncode


async def claimed_by(redis_url: str, prefix: str, consumer: str) -> int:
    """Entries of the shared inbox that ``consumer`` holds."""
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        summary = await client.xpending(f"{prefix}inbox:stream", "workers")
    finally:
        await client.aclose()
    return sum(int(c["pending"]) for c in summary["consumers"] if c["name"] == consumer.encode())


def payload(process_id: str, copy: int) -> dict[str, Any]:
    return {
        "event": "process.completed",
        "process_id": process_id,
        "order_id": "order-1",
        "tool": "tool-virtual-staging",
        "status": "done",
        "final_assets": [
            {
                "asset_id": f"{process_id}-out",
                "asset_type": "image",
                # Result URLs are signed anew for every delivery.
                "temp_src": f"https://cdn.example/{process_id}.jpg?sig={copy}",
                "temp_thumbnail_src": f"https://cdn.example/{process_id}-t.jpg?sig={copy}",
            }
        ],
    }


@pytest.fixture
async def nodes(redis_url: str, redis_prefix: str) -> AsyncIterator[dict[str, Node]]:
    # Process 2 stalls in its handlers: whatever it claims is still in flight when it is killed.
    started = await asyncio.gather(
        start_node(redis_url, redis_prefix, "0"),
        start_node(redis_url, redis_prefix, "1"),
        start_node(redis_url, redis_prefix, "2", "stall"),
    )
    live = {node.name: node for node in started}
    yield live
    # Whatever a failed test left running (a finished process is only reaped).
    for node in [*started, *(n for n in live.values() if all(n is not s for s in started))]:
        await stop_node(node)


async def test_three_receivers_lose_nothing_when_one_is_killed(
    redis_url: str, redis_prefix: str, nodes: dict[str, Node]
) -> None:
    rng = random.Random(20240601)
    process_ids = [f"proc-{n}" for n in range(EVENTS)]
    deliveries = [(pid, copy) for pid in process_ids for copy in range(COPIES)]
    rng.shuffle(deliveries)
    delivered = 0
    progress = asyncio.Condition()
    killed = nodes["2"]

    async def deliver(http: aiohttp.ClientSession, pid: str, copy: int) -> None:
        """POST until some live process answers 2xx, as the service retries non-2xx."""
        nonlocal delivered
        while True:
            node = rng.choice(list(nodes.values()))
            try:
                async with http.post(node.hook_url, json=payload(pid, copy)) as response:
                    if response.status == 200:
                        break
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.02)
        async with progress:
            delivered += 1
            progress.notify_all()

    async def send_all(http: aiohttp.ClientSession) -> None:
        gate = asyncio.Semaphore(8)

        async def one(pid: str, copy: int) -> None:
            async with gate:
                await deliver(http, pid, copy)

        await asyncio.gather(*(one(pid, copy) for pid, copy in deliveries))

    async def wait_on(http: aiohttp.ClientSession, node: Node, pid: str) -> str:
        async with http.get(node.wait_url(pid)) as response:
            assert response.status == 200, await response.text()
            return structure(json.loads(await response.read()), ProcessCompleted).process_id

    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as waiting,
        aiohttp.ClientSession() as sending,
    ):
        # Waiters on the two processes that stay up, two per event, before any delivery.
        early = [
            asyncio.create_task(wait_on(waiting, nodes[name], pid))
            for pid in process_ids
            for name in ("0", "1")
        ]
        sender = asyncio.create_task(send_all(sending))

        async with progress:
            await progress.wait_for(lambda: delivered >= len(deliveries) // 3)
        del nodes["2"]
        async with asyncio.timeout(30):  # a guard against a hang, not a speed requirement
            while not await claimed_by(redis_url, redis_prefix, "node-2"):  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        assert await stop_node(killed, signal.SIGKILL) == -signal.SIGKILL

        async with progress:
            await progress.wait_for(lambda: delivered >= 2 * len(deliveries) // 3)
        restarted = await start_node(redis_url, redis_prefix, "2-restarted")
        nodes[restarted.name] = restarted
        # Late waiters on the restarted process: most of their events landed long ago.
        late = [asyncio.create_task(wait_on(waiting, restarted, pid)) for pid in process_ids]

        await sender
        async with asyncio.timeout(60):  # a guard against a hang, not a speed requirement
            assert await asyncio.gather(*early) == [pid for pid in process_ids for _ in "01"]
            assert await asyncio.gather(*late) == process_ids

    inbox = RedisInbox(redis_url, prefix=redis_prefix)
    recorder = redis.asyncio.Redis.from_url(redis_url)
    try:
        # The killed process's claims are taken over once they time out; then all is finished.
        async with asyncio.timeout(60):
            while await inbox.pending_count():  # noqa: ASYNC110  # the state lives in Redis
                await asyncio.sleep(0.1)
        assert await inbox.dead_letters() == []
        runs = {
            str(k, "utf-8") if isinstance(k, bytes) else k: int(v)
            for k, v in (await recorder.hgetall(f"{redis_prefix}test:runs")).items()
        }
        assert await claimed_by(redis_url, redis_prefix, "node-2") == 0  # all taken over
        # 360 deliveries of 120 events, one process killed mid-run: each handler ran exactly
        # once.  (The killed process's handlers never finished; a process killed after a handler
        # but before its ack would make that handler run again: handlers are at least once.)
        assert runs == dict.fromkeys(process_ids, 1)
    finally:
        await inbox.close()
        await recorder.aclose()

    for name in list(nodes):
        assert await stop_node(nodes.pop(name)) == 0
