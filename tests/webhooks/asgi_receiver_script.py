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

import uvicorn
from receiver_script import crash_receiver
from starlette.applications import Starlette
from starlette.routing import Mount

from webhooks.asgi import ReceiverASGI


async def main(db: str, name: str, record: str, mode: str) -> None:
    receiver = crash_receiver(db, record, mode)
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
