"""The API key stays out of the frames of a request cancelled in flight.

A call stopped by ``processes.wait(timeout=)``, ``asyncio.timeout`` or ``asyncio.wait_for`` ends
in a ``CancelledError`` chained under the timeout error; error trackers that record every frame's
locals (Sentry's default) walk that chain, so none of its frames may hold the ``x-api-key``.
"""

from __future__ import annotations

import asyncio
import secrets
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
from aiohttp import web

from asyncsdk import Client, WaitTimeoutError

KEY = "sk_live_" + secrets.token_hex(24)


@pytest.fixture
async def hanging_api() -> AsyncIterator[str]:
    """An API on 127.0.0.1 that answers nothing for a minute; stopped when the test ends."""

    async def hang(_: web.Request) -> web.Response:
        await asyncio.sleep(60)
        return web.json_response({})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", hang)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        item = todo.pop()
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        todo.extend((item.__cause__, item.__context__))


def locals_shown(exc: BaseException) -> list[str]:
    """The repr of every local of every frame of ``exc`` and of each exception it chains."""
    shown = [
        "".join(traceback.TracebackException.from_exception(exc, capture_locals=True).format())
    ]
    for item in chain(exc):
        tb = item.__traceback__
        while tb is not None:
            shown.extend(f"{name}={value!r}" for name, value in tb.tb_frame.f_locals.items())
            tb = tb.tb_next
    return shown


async def in_wait(sdk: Client) -> None:
    await sdk.processes.wait("p-1", timeout=0.3)


async def in_asyncio_timeout(sdk: Client) -> None:
    async with asyncio.timeout(0.3):
        await sdk.processes.get("p-1")


async def in_wait_for(sdk: Client) -> None:
    await asyncio.wait_for(sdk.processes.get("p-1"), 0.3)


@pytest.mark.parametrize(
    ("cancel", "error"),
    [(in_wait, WaitTimeoutError), (in_asyncio_timeout, TimeoutError), (in_wait_for, TimeoutError)],
)
async def test_a_cancelled_request_leaves_no_api_key_in_any_frame(
    hanging_api: str,
    cancel: Callable[[Client], Awaitable[None]],
    error: type[BaseException],
) -> None:
    options: dict[str, Any] = {"min_poll_interval": 0.01}
    async with Client(api_key=KEY, base_url=hanging_api, **options) as sdk:
        with pytest.raises(error) as info:
            await cancel(sdk)
    exc = info.value
    assert any(isinstance(item, asyncio.CancelledError) for item in chain(exc))
    for text in locals_shown(exc):
        if KEY in text:  # the message shows where, with the key itself masked
            at = text.find(KEY)
            raise AssertionError(text[max(0, at - 1500) : at].replace(KEY, "<KEY>") + "<KEY>")
