"""Serving a receiver under a real ASGI server: uvicorn in this process on 127.0.0.1, port 0,
with the receiver mounted in a Starlette host app and started in its lifespan."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from webhooks import EventReceiver, WebhookReceiver
from webhooks.asgi import ReceiverASGI


@contextlib.asynccontextmanager
async def uvicorn_serving(receiver: WebhookReceiver | EventReceiver) -> AsyncIterator[str]:
    """Mount ``receiver`` at ``/hooks`` in a Starlette app served by uvicorn; yield its base URL.
    Leaving stops the server, whose lifespan drains the receiver."""
    hooks = ReceiverASGI(receiver)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with hooks.serving():
            yield

    async def home(_request: object) -> PlainTextResponse:
        return PlainTextResponse("host app")

    app = Starlette(routes=[Route("/", home), Mount("/hooks", app=hooks)], lifespan=lifespan)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="on", log_level="warning")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(10):
            while not server.started:
                if task.done():
                    task.result()  # the server failed to start: raise its error
                await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
