"""``python -m benchmarks.redis_durability [EVENTS]``: what the Redis inbox's strict mode costs.

A receiver on a :class:`webhooks.RedisInbox` (a handler that does nothing) answers ``EVENTS``
deliveries (default 3000) posted by 32 concurrent senders over HTTP on 127.0.0.1, on a Redis
server the benchmark starts itself (own port, own directory on the system's temporary disk,
``appendonly yes``, no RDB), once per row:

- ``relaxed, everysec``: the default; a host crash can lose about 1 s of acknowledged deliveries;
- ``strict, always``: ``durability="strict"`` on ``appendfsync always`` (an fsync per write);
- ``strict, WAIT 1``: ``durability="strict", replicas=1`` on ``everysec``, with one replica (a
  second server on the same host).

Each row prints deliveries per second and the p50 and p99 of the time to the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import redis
import redis.asyncio
from aiohttp import web

from asyncsdk import ProcessCompleted
from webhooks import RedisInbox, TokenVerifier, WebhookReceiver

EVENTS = 3000
CONCURRENCY = 32
TOKEN = "bench-" + "d0" * 16
PREFIX = "bench:"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@contextlib.contextmanager
def _redis_server(directory: Path, appendfsync: str, *extra: str) -> Iterator[int]:
    """A redis-server of the benchmark's own on a free port; its port."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed")
    directory.mkdir(parents=True)
    port = _free_port()
    process = subprocess.Popen(
        [
            *(binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory)),
            *("--save", "", "--appendonly", "yes", "--appendfsync", appendfsync),
            *("--logfile", str(directory / "redis.log"), *extra),
        ]
    )
    try:
        client = redis.Redis(port=port)
        for _ in range(400):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        client.close()
        yield port
    finally:
        process.kill()
        process.wait()


@contextlib.asynccontextmanager
async def _receiver(url: str, **inbox_options: Any) -> AsyncIterator[str]:
    """A receiver on a RedisInbox at ``url``, served on 127.0.0.1; its hook URL."""
    receiver = WebhookReceiver(
        inbox=RedisInbox(url, prefix=PREFIX, **inbox_options),
        verifier=TokenVerifier(TOKEN),
        queue_limit=1_000_000,
    )

    @receiver.on_completed()
    async def nothing(event: ProcessCompleted) -> None:
        return None

    app = web.Application()
    receiver.setup(app, prefix="/hooks/")
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/hooks/{TOKEN}"
    finally:
        await runner.cleanup()


def _body(n: int) -> bytes:
    return (
        b'{"event":"process.completed","process_id":"p-%d","order_id":"o-1",'
        b'"tool":"tool-virtual-staging","status":"done","final_assets":[]}' % n
    )


async def _measure(name: str, hook: str, events: int) -> None:
    took: list[float] = []
    gate = asyncio.Semaphore(CONCURRENCY)
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession() as session:

        async def one(n: int) -> None:
            async with gate:
                started = time.perf_counter()
                async with session.post(hook, data=_body(n), headers=headers) as answer:
                    if answer.status != 200:
                        raise SystemExit(f"{name}: answered {answer.status}: {await answer.text()}")
                took.append(time.perf_counter() - started)

        await asyncio.gather(*(one(-n - 1) for n in range(CONCURRENCY)))  # warm up
        took.clear()
        started = time.perf_counter()
        await asyncio.gather(*(one(n) for n in range(events)))
        elapsed = time.perf_counter() - started
    took.sort()
    print(
        f"{name:18} {events / elapsed:7.0f} deliveries/s   p50 {took[len(took) // 2] * 1e3:6.2f} ms"
        f"   p99 {took[int(len(took) * 0.99)] * 1e3:6.2f} ms",
        flush=True,
    )


async def _replica_online(port: int) -> None:
    client = redis.asyncio.Redis(port=port)
    try:
        for _ in range(600):
            if (await client.info("replication")).get("slave0", {}).get("state") == "online":
                return
            await asyncio.sleep(0.05)
    finally:
        await client.aclose()
    raise SystemExit("the replica did not sync with its primary within 30 s")


async def main(events: int) -> None:
    print(
        f"{events} deliveries, {CONCURRENCY} concurrent senders, Redis on {tempfile.gettempdir()}"
        f" ({os.cpu_count()} CPUs)"
    )
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as tmp:
        root = Path(tmp)
        with _redis_server(root / "everysec", "everysec") as port:
            async with _receiver(f"redis://127.0.0.1:{port}/0") as hook:
                await _measure("relaxed, everysec", hook, events)
        with _redis_server(root / "always", "always") as port:
            async with _receiver(f"redis://127.0.0.1:{port}/0", durability="strict") as hook:
                await _measure("strict, always", hook, events)
        with (
            _redis_server(root / "primary", "everysec") as port,
            _redis_server(root / "replica", "everysec", "--replicaof", "127.0.0.1", str(port)),
        ):
            await _replica_online(port)
            async with _receiver(
                f"redis://127.0.0.1:{port}/0", durability="strict", replicas=1
            ) as hook:
                await _measure("strict, WAIT 1", hook, events)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else EVENTS))
