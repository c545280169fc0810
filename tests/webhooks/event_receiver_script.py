"""A receiver of another sender's events, for the crash tests:
``python event_receiver_script.py STORE PLACE NAMESPACE NAME RECORD MODE``.

STORE names a row of ``webhooks.stores.STORES``; PLACE and NAMESPACE are its (tests'
``Place.argv()``).  MODE ``block``: handlers never finish (the process is to be killed mid-work).
MODE ``record``: handlers append ``message_id type`` lines to RECORD.
MODE ``atomic``: an ``atomic=True`` handler appends ``run message_id`` to RECORD and queues one
increment of the message's count in the store (Redis: the hash ``<prefix>test:effects``;
PostgreSQL: the table ``<schema>.effects``, which the test creates); ``atomic-die``: the same,
then the process kills itself with SIGKILL before the ack.
Serves on 127.0.0.1 (a free port); prints ``{"ready": NAME, "port": N}`` once serving; stops on
SIGTERM.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from aiohttp import web
from node_process import serve_until_terminated
from receiver_script import append

from webhooks import EventReceiver, StandardWebhooksVerifier, WebhookEvent
from webhooks.stores import store_named

SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # 24 bytes of key, base64


async def main(store: str, place: str, namespace: str, name: str, record: str, mode: str) -> None:
    receiver = EventReceiver(
        inbox=store_named(store).open_inbox(place, namespace, claim_timeout=0.5),
        verifier=StandardWebhooksVerifier(SECRET),
        poll_interval=0.05,
        drain_timeout=0.1,
    )

    if mode.startswith("atomic"):

        @receiver.on_any(atomic=True)
        async def count(event: WebhookEvent, writes: Any) -> None:
            append(record, f"run {event.id}\n")
            if store == "redis":
                writes.call("HINCRBY", f"{namespace}test:effects", event.id, 1)
            else:
                writes.execute(
                    f'INSERT INTO "{namespace}".effects VALUES ($1, 1)'
                    " ON CONFLICT (message_id) DO UPDATE SET n = effects.n + 1",
                    event.id,
                )
            if mode == "atomic-die":
                os.kill(os.getpid(), signal.SIGKILL)

    else:

        @receiver.on_any()
        async def handle(event: WebhookEvent) -> None:
            if mode == "block":
                await asyncio.Event().wait()
            append(record, f"{event.id} {event.type}\n")

    app = web.Application()
    receiver.setup(app, prefix="/events/")
    await serve_until_terminated(app, name)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
