"""One receiver process of the soak, and the parent's handle on it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from pathlib import Path
from typing import Final

import attrs

ROOT: Final = Path(__file__).resolve().parents[2]
TOKEN: Final = "soak-" + "Hq3vT9xK2mWp" * 3
METRICS_TOKEN: Final = "scrape-" + "Rz8wQ4nL" * 3
WORKERS: Final = 8
START_TIMEOUT: Final = 60.0


# --- inside the receiver process ----------------------------------------------------------------


async def run_node(url: str, prefix: str, name: str, claim_timeout: float) -> None:
    """Serve the receiver on 127.0.0.1 until SIGTERM; print ``{"ready": name, "port": p}``."""
    import redis.asyncio
    from aiohttp import web

    from asyncsdk import ProcessCompleted
    from webhooks import RedisInbox, RedisRegistry, RedisWrites, TokenVerifier, WebhookReceiver

    recorder = redis.asyncio.Redis.from_url(url)
    registry = RedisRegistry(url, prefix=prefix)
    receiver = WebhookReceiver(
        inbox=RedisInbox(url, prefix=prefix, claim_timeout=claim_timeout),
        verifier=TokenVerifier(TOKEN),
        registry=registry,
        workers=WORKERS,
        poll_interval=0.1,
        queue_limit=1_000_000,
        metrics_route=True,
        metrics_token=METRICS_TOKEN,
        consumer=f"soak-{name}",
    )
    calls, runs, first = f"{prefix}soak:calls", f"{prefix}soak:runs", f"{prefix}soak:first"

    @receiver.on_completed(atomic=True)
    async def record(event: ProcessCompleted, writes: RedisWrites) -> None:
        async with recorder.pipeline(transaction=False) as pipe:
            pipe.hincrby(runs, event.process_id, 1)
            pipe.hsetnx(first, event.process_id, name)
            await pipe.execute()
        writes.call("HINCRBY", calls, event.process_id, 1)

    async def close(_: web.Application) -> None:
        await registry.close()
        await recorder.aclose()

    app = web.Application()
    receiver.setup(app, prefix="/hooks/")
    app.on_cleanup.append(close)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
    await site.start()
    await registry.start()
    print(json.dumps({"ready": name, "port": runner.addresses[0][1]}), flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await runner.cleanup()


# --- the parent's side ------------------------------------------------------------------------


def ack_p99(exposition: str) -> float | None:
    """The upper bound of the ack-latency bucket holding the 99th percentile, from a scrape."""
    from prometheus_client.parser import text_string_to_metric_families

    buckets = [
        (float(sample.labels["le"]), sample.value)
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
        if sample.name == "webhooks_ack_latency_seconds_bucket"
    ]
    total = max((count for _, count in buckets), default=0.0)
    if not total:
        return None
    # None past the last finite bound (10 s): the exposition does not say how far past.
    finite = [(bound, count) for bound, count in sorted(buckets) if bound != float("inf")]
    return next((bound for bound, count in finite if count >= 0.99 * total), None)


@attrs.define(eq=False)
class Node:
    name: str
    process: asyncio.subprocess.Process
    port: int
    log: Path

    @property
    def hook_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/{TOKEN}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/metrics"


async def start_node(url: str, prefix: str, name: str, claim_timeout: float, logs: Path) -> Node:
    log = logs / f"node-{name}.log"
    with log.open("wb") as err:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "benchmarks.soak",
            "node",
            url,
            prefix,
            name,
            str(claim_timeout),
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
        )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(START_TIMEOUT):
            line = await process.stdout.readline()
    except TimeoutError:
        line = b""
    if not line:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        raise RuntimeError(
            f"receiver {name} did not start (exit {process.returncode}):\n{log.read_text()[-2000:]}"
        )
    return Node(name, process, int(json.loads(line)["port"]), log)


async def stop_node(node: Node, sig: int = signal.SIGTERM) -> int:
    if node.process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            node.process.send_signal(sig)
    try:
        async with asyncio.timeout(30):
            await node.process.wait()
    except TimeoutError:
        node.process.kill()
        await node.process.wait()
    return int(node.process.returncode or 0)
