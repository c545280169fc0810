"""``python -m benchmarks.redis_durability [EVENTS [ROUNDS]]``: what strict Redis durability costs.

Three receivers on :class:`webhooks.RedisInbox` (a handler that does nothing), each on a Redis
server the benchmark starts itself (own port, own directory on the system's temporary disk,
``appendonly yes``, no RDB snapshots):

- ``relaxed, appendfsync everysec``: the default; a host crash can lose about 1 s of
  acknowledged deliveries;
- ``strict, appendfsync always``: ``durability="strict"``; Redis fsyncs each write before it
  answers (one fsync per turn of its event loop, for all the writes of that turn);
- ``strict, replicas=1 (WAIT)``: ``durability="strict", replicas=1`` on ``everysec``, with one
  replica (a fourth server, on the same host).

In each of ``ROUNDS`` rounds (default 7) the rows take turns, each first in turn: ``EVENTS`` new
deliveries (default 1000) posted by 32 concurrent senders over HTTP on 127.0.0.1.  The table
gives the medians over the rounds of deliveries per second and of the p50 and p99 of the time to
the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import statistics
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

EVENTS = 1000
ROUNDS = 7
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


async def _measure(hook: str, events: int, first: int) -> tuple[float, list[float]]:
    """Deliveries per second and the sorted answer times of ``events`` new deliveries."""
    took: list[float] = []
    gate = asyncio.Semaphore(CONCURRENCY)
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession() as session:

        async def one(n: int) -> None:
            async with gate:
                started = time.perf_counter()
                async with session.post(hook, data=_body(n), headers=headers) as answer:
                    if answer.status != 200:
                        raise SystemExit(f"{hook}: answered {answer.status}: {await answer.text()}")
                took.append(time.perf_counter() - started)

        started = time.perf_counter()
        await asyncio.gather(*(one(n) for n in range(first, first + events)))
        elapsed = time.perf_counter() - started
    return events / elapsed, sorted(took)


def _row(name: str, rounds: list[tuple[float, list[float]]]) -> str:
    rate = statistics.median(r for r, _ in rounds)
    p50 = statistics.median(t[len(t) // 2] for _, t in rounds)
    p99 = statistics.median(t[int(len(t) * 0.99)] for _, t in rounds)
    return (
        f"| {name} | {rate:,.0f} | {p50 * 1e3:.2f} | {p99 * 1e3:.2f} |"
        f" {min(r for r, _ in rounds):,.0f} to {max(r for r, _ in rounds):,.0f} |"
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


async def main(events: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as tmp:
        root = Path(tmp)
        with (
            _redis_server(root / "everysec", "everysec") as everysec,
            _redis_server(root / "always", "always") as always,
            _redis_server(root / "primary", "everysec") as primary,
            _redis_server(root / "replica", "everysec", "--replicaof", "127.0.0.1", str(primary)),
        ):
            await _replica_online(primary)
            async with (
                _receiver(f"redis://127.0.0.1:{everysec}/0") as relaxed,
                _receiver(f"redis://127.0.0.1:{always}/0", durability="strict") as strict,
                _receiver(
                    f"redis://127.0.0.1:{primary}/0", durability="strict", replicas=1
                ) as waits,
            ):
                rows = {
                    "relaxed, appendfsync everysec": relaxed,
                    "strict, appendfsync always": strict,
                    "strict, replicas=1 (WAIT)": waits,
                }
                measured: dict[str, list[tuple[float, list[float]]]] = {n: [] for n in rows}
                for hook in rows.values():  # warm-up
                    await _measure(hook, CONCURRENCY, -CONCURRENCY)
                names = list(rows)
                for n in range(rounds):  # the rows take turns, first in turn, so that the
                    turn = names[n % len(names) :] + names[: n % len(names)]  # machine's drift
                    for name in turn:  # falls on each alike
                        measured[name].append(await _measure(rows[name], events, n * events))
    print(
        f"{events:,} deliveries per round, {rounds} rounds (the rows take turns), {CONCURRENCY}"
        f" concurrent senders over HTTP on 127.0.0.1, Redis {_version()} on"
        f" {tempfile.gettempdir()}, {os.cpu_count()} CPUs; medians of the rounds\n"
    )
    print("| durability | deliveries/s | p50 ms | p99 ms | deliveries/s, rounds |")
    print("|---|---|---|---|---|")
    for name, result in measured.items():
        print(_row(name, result))


def _version() -> str:
    binary = shutil.which("redis-server") or "redis-server"
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    return next((w[2:] for w in out.stdout.split() if w.startswith("v=")), "?")


if __name__ == "__main__":
    asyncio.run(
        main(
            int(sys.argv[1]) if len(sys.argv) > 1 else EVENTS,
            int(sys.argv[2]) if len(sys.argv) > 2 else ROUNDS,
        )
    )
