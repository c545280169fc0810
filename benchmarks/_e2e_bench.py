"""Section 5: from a process's completion in the sandbox to ``client.processes.wait`` returning.

Everything runs in one fresh child (one event loop): the sandbox, the client, and on the webhook
path the receiver (mounted on its own 127.0.0.1 port, registered as the sandbox's webhook URL) with
its registry.  The sandbox holds every process at ``processing`` (``processing_delay=inf``) until
``Sandbox.advance()``: the moment of ``advance()`` is the completion time, and the process is
marked done and its webhook sent within the same loop iteration.

* Webhook path: one process at a time; ``wait(pid, registry=...)`` is pending before the advance.
* Polling path: ``n`` processes and ``n`` waiters whose first polls are spread evenly over one
  poll interval, then one advance: the latencies sample the whole phase of the poll cycle.
"""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path
from typing import Any, Final

from aiohttp import web

from benchmarks._child import ChildIO

TOOL: Final = "tool-image-enhancement"
SLOT: Final = "tool-image-enhancement-input-image"
WIDGETS: Final = [
    {
        "slug": "widget-area-tool-image-enhancement",
        "item_slugs": ["item-indoor-widget-area-tool-image-enhancement"],
    }
]
TOKEN: Final = "bench-e2e-token-0123456789abcdef"  # noqa: S105 - a fixture, not a secret
RENDER_WAIT: Final = 0.25
"""Seconds left for the sandbox to render a result before the process is released."""


async def _start_receiver(
    inbox_kind: str, registry_kind: str, workdir: str, redis_url: str, prefix: str
) -> tuple[web.AppRunner, str, Any]:
    from webhooks import MemoryInbox, Registry, SQLiteInbox, TokenVerifier, WebhookReceiver

    registry: Any
    if registry_kind == "redis":
        from webhooks import RedisRegistry

        registry = RedisRegistry(redis_url, prefix=prefix)
        await registry.start()
    else:
        registry = Registry()
    inbox: Any = SQLiteInbox(Path(workdir) / "e2e.db") if inbox_kind == "sqlite" else MemoryInbox()
    receiver = WebhookReceiver(inbox=inbox, verifier=TokenVerifier(TOKEN), registry=registry)
    app = web.Application()
    receiver.setup(app, "/hooks/")
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}/hooks/{TOKEN}", registry


async def job(
    io: ChildIO,
    *,
    path: str,
    samples: int,
    interval: float,
    workdir: str,
    redis_url: str,
    prefix: str,
) -> dict[str, Any]:
    """``path``: ``webhook-memory``, ``webhook-sqlite-redis`` or ``poll``."""
    from asyncsdk import Client
    from asyncsdk.samples import path as sample_path
    from asyncsdk.sandbox import Sandbox, SandboxConfig

    sandbox = Sandbox(SandboxConfig(processing_delay=math.inf))
    await sandbox.start()
    runner: web.AppRunner | None = None
    registry: Any = None
    try:
        if path.startswith("webhook"):
            inbox_kind, registry_kind = (
                ("sqlite", "redis") if path == "webhook-sqlite-redis" else ("memory", "memory")
            )
            runner, url, registry = await _start_receiver(
                inbox_kind, registry_kind, workdir, redis_url, prefix
            )
            sandbox.register_webhook(url)
        async with Client(
            api_key=sandbox.api_key,
            base_url=sandbox.base_url,
            min_poll_interval=interval,
            generation_limit=None,  # the completion path is measured, not the pacing
        ) as client:
            order = await client.orders.create(sample_path("kitchen.jpg"))
            asset = order.assets[0].id

            async def new_process() -> str:
                created = await client.processes.create(
                    order.order_id, TOOL, {SLOT: asset}, WIDGETS
                )
                return created.process_ids[0]

            async def waited(pid: str) -> float:
                process = await client.processes.wait(pid, timeout=120, registry=registry)
                if process.status != "done":
                    raise RuntimeError(f"process {pid} ended {process.status}")
                return time.monotonic()

            latencies: list[float] = []
            if registry is not None:
                for _ in range(samples + 2):  # the first two warm the path up
                    pid = await new_process()
                    await asyncio.sleep(RENDER_WAIT)
                    task = asyncio.create_task(waited(pid))
                    await asyncio.sleep(0.02)
                    released = time.monotonic()
                    sandbox.advance()
                    latencies.append(await task - released)
                latencies = latencies[2:]
            else:
                pids = [await new_process() for _ in range(samples)]
                await asyncio.sleep(RENDER_WAIT)
                tasks = []
                for pid in pids:
                    tasks.append(asyncio.create_task(waited(pid)))
                    await asyncio.sleep(interval / samples)
                await asyncio.sleep(0.05)
                released = time.monotonic()
                sandbox.advance()
                latencies = [woke - released for woke in await asyncio.gather(*tasks)]
            gets = sandbox.stats.requests.get("GET /v3/process/{id}", 0)
    finally:
        if runner is not None:
            await runner.cleanup()
        if registry is not None:
            await registry.close()
        await sandbox.stop()
    return {"path": path, "interval": interval, "latencies": latencies, "gets": gets}
