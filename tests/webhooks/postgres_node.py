"""One receiver process on a :class:`PostgresInbox` (run as a script, not collected by pytest).

An aiohttp app on 127.0.0.1 (a free port) with the webhook receiver mounted at ``/hooks/`` on a
:class:`PostgresInbox` in the given schema, whose one handler is an ``atomic=True`` one: it counts
its runs in the table ``<schema>.runs`` at once (on a connection of its own) and queues an
increment of ``<schema>.effects`` on its writes, which commit with the ack.  With ``atomic-die``
it then kills its own process with SIGKILL, after the handler and before the ack.  Prints
``{"ready": NAME, "port": N}`` once serving; stops on SIGTERM.

    python postgres_node.py DSN SCHEMA TOKEN NAME [atomic|atomic-die]
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

import asyncpg
from aiohttp import web
from node_process import serve_until_terminated

from asyncsdk import ProcessCompleted
from webhooks import PostgresInbox, PostgresWrites, TokenVerifier, WebhookReceiver

CLAIM_TIMEOUT = 1.0
COUNT = (
    'INSERT INTO "{schema}".{table} VALUES ($1, 1)'
    " ON CONFLICT (process_id) DO UPDATE SET n = {table}.n + 1"
)


async def main(dsn: str, schema: str, token: str, name: str, mode: str = "atomic") -> None:
    logging.basicConfig(format=f"node {name}: %(levelname)s %(name)s %(message)s")
    recorder = await asyncpg.connect(dsn)
    receiver = WebhookReceiver(
        inbox=PostgresInbox(dsn, schema=schema, claim_timeout=CLAIM_TIMEOUT),
        verifier=TokenVerifier(token),
        workers=2,
        poll_interval=0.05,
        consumer=f"node-{name}",
    )

    @receiver.on_completed(atomic=True)
    async def record(event: ProcessCompleted, writes: PostgresWrites) -> None:
        await recorder.execute(COUNT.format(schema=schema, table="runs"), event.process_id)
        writes.execute(COUNT.format(schema=schema, table="effects"), event.process_id)
        if mode == "atomic-die":
            os.kill(os.getpid(), signal.SIGKILL)

    async def close(_: web.Application) -> None:
        await recorder.close()

    app = web.Application()
    receiver.setup(app, prefix="/hooks/")
    app.on_cleanup.append(close)

    await serve_until_terminated(app, name)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
