"""A receiver process served by uvicorn for the crash test:
``python asgi_receiver_script.py DB NAME RECORD MODE``, modes as in ``receiver_script.py``.

The receiver is mounted in a Starlette app and started in its lifespan.  Serves on 127.0.0.1 (a
free port); prints ``{"ready": NAME, "port": N}`` once serving; drains and stops on SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount

from asyncsdk import ProcessCompleted
from webhooks import SQLiteInbox, TokenVerifier, WebhookReceiver
from webhooks.asgi import ReceiverASGI

TOKEN = "tok-" + "a1b2c3d4" * 4


def append(path: str, line: str) -> None:
    with Path(path).open("a") as out:
        out.write(line)


async def main(db: str, name: str, record: str, mode: str) -> None:
    receiver = WebhookReceiver(
        inbox=SQLiteInbox(db, claim_timeout=0.5),
        verifier=TokenVerifier(TOKEN),
        poll_interval=0.05,
        drain_timeout=0.1,
    )

    @receiver.on_completed()
    async def handle(event: ProcessCompleted) -> None:
        if mode == "block":
            await asyncio.Event().wait()
        append(record, f"{event.process_id} {event.status}\n")

    hooks = ReceiverASGI(receiver)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with hooks.serving():
            yield

    app = Starlette(routes=[Mount("/hooks", app=hooks)], lifespan=lifespan)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    print(json.dumps({"ready": name, "port": port}), flush=True)
    await task


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
