"""One receiver process of the multi-instance test (run as a script, not collected by pytest).

An aiohttp app on 127.0.0.1 (a free port) with the webhook receiver mounted at ``/hooks/`` on a
:class:`RedisInbox` and a :class:`RedisRegistry` under the given prefix, plus ``GET /wait/{pid}``
that waits on the registry and answers the event as JSON.  The handler counts its runs per
process id in the Redis hash ``<prefix>test:runs``; with ``stall`` its handlers never finish, so
the entries it claims stay claimed until the process dies.  With ``atomic`` the handler is an
``atomic=True`` one instead: it counts its runs in ``<prefix>test:runs`` directly and queues
``HINCRBY <prefix>test:effects <pid> 1`` on its writes; with ``atomic-die`` it then kills its own
process with SIGKILL, after the handler and before the ack.  With ``burst`` the receiver's
``queue_limit`` is 200 and each handler waits until the key ``<prefix>test:open`` exists (the
test holds the handlers while it fills the shared inbox); with ``slow`` each takes 200 ms.
Every run of the plain handler is also counted per node in ``<prefix>test:nodes``.  Prints
``{"ready": NAME, "port": N}`` once serving; stops on SIGTERM.

    python redis_node.py REDIS_URL PREFIX TOKEN NAME [stall|atomic|atomic-die|burst|slow]
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

import attrs
import redis.asyncio
from aiohttp import web
from node_process import serve_until_terminated

from asyncsdk import ProcessCompleted
from webhooks import (
    RedisInbox,
    RedisRegistry,
    RedisWrites,
    RegistryClosedError,
    TokenVerifier,
    WebhookReceiver,
)

CLAIM_TIMEOUT = 1.0
WORKERS = 4
BURST_LIMIT = 200
HANDLER_SECONDS = {"slow": 0.2}


async def main(url: str, prefix: str, token: str, name: str, mode: str = "") -> None:
    logging.basicConfig(format=f"node {name}: %(levelname)s %(name)s %(message)s")
    recorder = redis.asyncio.Redis.from_url(url)
    registry = RedisRegistry(url, prefix=prefix)
    receiver = WebhookReceiver(
        inbox=RedisInbox(url, prefix=prefix, claim_timeout=CLAIM_TIMEOUT),
        verifier=TokenVerifier(token),
        registry=registry,
        workers=WORKERS,
        poll_interval=0.05,
        consumer=f"node-{name}",
        queue_limit=BURST_LIMIT if mode == "burst" else 10_000,
    )

    never = asyncio.Event()

    async def record(event: ProcessCompleted) -> None:
        if mode == "stall":
            await never.wait()
        if mode == "burst":
            gate = f"{prefix}test:open"
            while not await recorder.exists(gate):  # noqa: ASYNC110 - the gate lives in Redis
                await asyncio.sleep(0.02)
        await asyncio.sleep(HANDLER_SECONDS.get(mode, 0.01))
        await recorder.hincrby(f"{prefix}test:runs", event.process_id, 1)
        await recorder.hincrby(f"{prefix}test:nodes", name, 1)

    async def record_atomic(event: ProcessCompleted, writes: RedisWrites) -> None:
        await recorder.hincrby(f"{prefix}test:runs", event.process_id, 1)
        writes.call("HINCRBY", f"{prefix}test:effects", event.process_id, 1)
        if mode == "atomic-die":
            os.kill(os.getpid(), signal.SIGKILL)

    if mode.startswith("atomic"):
        receiver.on_completed(atomic=True)(record_atomic)
    else:
        receiver.on_completed()(record)

    async def wait(request: web.Request) -> web.Response:
        timeout = float(request.query.get("timeout", "30"))
        try:
            event = await registry.wait(request.match_info["pid"], timeout=timeout)
        except TimeoutError:
            return web.json_response({"error": "timeout"}, status=504)
        except RegistryClosedError:
            return web.json_response({"error": "closed"}, status=503)
        return web.json_response(attrs.asdict(event))

    async def close(_: web.Application) -> None:
        await registry.close()
        await recorder.aclose()

    app = web.Application()
    app.router.add_get("/wait/{pid}", wait)
    receiver.setup(app, prefix="/hooks/")
    app.on_cleanup.append(close)

    await serve_until_terminated(app, name, ready=registry.start)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
