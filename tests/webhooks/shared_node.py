"""One receiver process on a shared Redis or PostgreSQL inbox (run as a script, not collected).

An aiohttp app on 127.0.0.1 (a free port) with the webhook receiver mounted at ``/hooks/``,
serving its Prometheus metrics at ``/hooks/metrics`` (token: ``METRICS_TOKEN``) and its probes'
routes at ``/hooks/ready`` and ``/hooks/live``, stopping with ``drain_timeout`` DRAIN_TIMEOUT.
Its plain handler appends the process id to the file RUNS (one line per run, from any node);
events whose status is ``failed`` also go, first, to an ``atomic=True`` handler that counts
them in the store, with the ack: the Redis hash ``<prefix>test:effects``, or the table
``<schema>.effects`` (which the test creates).  With ``hold``, the plain handler waits for a
SIGUSR1 to the process before it records its run.  With ``overrun``, both handlers, on an
entry's first hand-out (``info.attempt == 1``), never finish: the plain one before it records
its run, the atomic one after it queued its write.  Prints ``{"ready": NAME, "port": N}`` once
serving; stops on SIGTERM.

    python shared_node.py redis|postgres URL PREFIX_OR_SCHEMA TOKEN NAME RUNS CLAIM_TIMEOUT
        DRAIN_TIMEOUT [hold|overrun]
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from typing import Any

from aiohttp import web
from node_process import serve_until_terminated

from asyncsdk import ProcessCompleted
from webhooks import DeliveryInfo, PostgresWrites, RedisWrites, TokenVerifier, WebhookReceiver
from webhooks.stores import store_named

METRICS_TOKEN = "metrics-" + "m3tr1c5" * 4
HANDLER_SECONDS = 0.02


async def main(
    backend: str,
    url: str,
    where: str,
    token: str,
    name: str,
    runs: str,
    claim_timeout: str,
    drain_timeout: str,
    mode: str = "",
) -> None:
    logging.basicConfig(format=f"node {name}: %(levelname)s %(name)s %(message)s")
    timeout = float(claim_timeout)
    receiver = WebhookReceiver(
        inbox=store_named(backend).open_inbox(url, where, claim_timeout=timeout),
        verifier=TokenVerifier(token),
        workers=4,
        poll_interval=0.05,
        consumer=f"node-{name}",
        metrics_route=True,
        metrics_token=METRICS_TOKEN,
        health_routes=True,
        drain_timeout=float(drain_timeout),
    )
    released = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, released.set)
    out = os.open(runs, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    never = asyncio.Event()

    @receiver.on_completed(status="failed", atomic=True)
    async def effect(event: ProcessCompleted, writes: Any, info: DeliveryInfo) -> None:
        if backend == "redis":
            redis_writes: RedisWrites = writes
            redis_writes.call("HINCRBY", f"{where}test:effects", event.process_id, 1)
        else:
            postgres_writes: PostgresWrites = writes
            postgres_writes.execute(
                f'INSERT INTO "{where}".effects VALUES ($1, 1)'
                " ON CONFLICT (process_id) DO UPDATE SET n = effects.n + 1",
                event.process_id,
            )
        if mode == "overrun" and info.attempt == 1:
            await never.wait()

    @receiver.on_completed()
    async def record(event: ProcessCompleted, info: DeliveryInfo) -> None:
        await asyncio.sleep(HANDLER_SECONDS)
        if mode == "hold":
            await released.wait()
        if mode == "overrun" and info.attempt == 1:
            await never.wait()
        os.write(out, f"{event.process_id}\n".encode())  # one append: whole lines

    app = web.Application()
    receiver.setup(app, prefix="/hooks/")
    await serve_until_terminated(app, name)
    os.close(out)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:10]))
