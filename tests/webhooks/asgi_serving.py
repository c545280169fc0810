"""Serving a receiver under a real ASGI server, uvicorn or hypercorn, in this process on
127.0.0.1, port 0, with the receiver mounted in a Starlette host app and started in its
lifespan."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator

import hypercorn.asyncio
import hypercorn.config
import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from webhooks import EventReceiver, WebhookReceiver
from webhooks.asgi import ReceiverASGI


def host_app(receiver: WebhookReceiver | EventReceiver) -> Starlette:
    """A Starlette app with a page of its own and ``receiver`` mounted at ``/hooks``, started
    and drained in its lifespan."""
    hooks = ReceiverASGI(receiver)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with hooks.serving():
            yield

    async def home(_request: object) -> PlainTextResponse:
        return PlainTextResponse("host app")

    return Starlette(routes=[Route("/", home), Mount("/hooks", app=hooks)], lifespan=lifespan)


@contextlib.asynccontextmanager
async def hypercorn_serving(
    receiver: WebhookReceiver | EventReceiver, *, root_path: str = ""
) -> AsyncIterator[str]:
    """:func:`uvicorn_serving` under hypercorn, which, with ``root_path`` (``--root-path``),
    leaves that prefix out of the request's path as a proxy in front of it would have."""
    listening = socket.create_server(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    config = hypercorn.config.Config()
    config.bind = [f"fd://{listening.detach()}"]  # hypercorn's from here on: it closes it
    config.root_path = root_path
    config.loglevel = "WARNING"
    stop = asyncio.Event()
    task = asyncio.create_task(
        hypercorn.asyncio.serve(host_app(receiver), config, shutdown_trigger=stop.wait)
    )
    try:
        await asyncio.wait_for(_started(receiver, task), 10)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop.set()
        await task


async def _started(receiver: WebhookReceiver | EventReceiver, task: asyncio.Task[None]) -> None:
    while not receiver.running:
        if task.done():
            task.result()  # the server failed to start: raise its error
        await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def uvicorn_serving(receiver: WebhookReceiver | EventReceiver) -> AsyncIterator[str]:
    """Mount ``receiver`` at ``/hooks`` in a Starlette app served by uvicorn; yield its base URL.
    Leaving stops the server, whose lifespan drains the receiver."""
    app = host_app(receiver)
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
