"""Whatever a receiver does wrong, the secrets of its webhook URL (the path token, a query value,
the password) never show in clear on the page, in ``GET /_sandbox/stats`` or in the failure
line: each kind of failure a receiver can produce, over real HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from html import escape
from urllib.parse import quote

import aiohttp
import pytest
import yarl
from aiohttp import web

import asyncsdk
from asyncsdk import samples
from asyncsdk.sandbox import Sandbox, SandboxConfig

TOKEN = "s3cret-token-0123456789"
#: A query secret that is percent-encoded in the URL, so that it can show in either form.
SIGNATURE = "query secret/4242"
ENCODED = quote(SIGNATURE, safe="")
PASSWORD = "pass-word-secret-77"
#: A token of another receiver the redirect loop passes through.
OTHER = "other-token-5555555555"
SECRETS = (TOKEN, SIGNATURE, ENCODED, quote(ENCODED, safe=""), PASSWORD, OTHER)
HOOK = f"/hooks/{TOKEN}?sig={ENCODED}"


def webhook_url(port: int, scheme: str = "http") -> str:
    return f"{scheme}://hook-user:{PASSWORD}@127.0.0.1:{port}{HOOK}"


@contextlib.asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[int]:
    """``app`` on a free port of 127.0.0.1; yields the port."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def nothing_listening() -> AsyncIterator[str]:
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    yield webhook_url(port)


@contextlib.asynccontextmanager
async def silent() -> AsyncIterator[str]:
    """A receiver that never answers (until the test ends)."""
    done = asyncio.Event()

    async def hook(request: web.Request) -> web.Response:
        await done.wait()
        return web.Response()

    app = web.Application()
    app.router.add_post("/hooks/{token}", hook)
    async with serving(app) as port:
        try:
            yield webhook_url(port)
        finally:
            done.set()


@contextlib.asynccontextmanager
async def redirect_loop() -> AsyncIterator[str]:
    """A receiver that sends the hook to another token's URL, which sends it back."""

    async def hook(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect(f"/relay/{OTHER}?key={ENCODED}")

    async def relay(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect(HOOK)

    app = web.Application()
    app.router.add_post("/hooks/{token}", hook)
    app.router.add_post("/relay/{token}", relay)
    async with serving(app) as port:
        yield webhook_url(port)


@contextlib.asynccontextmanager
async def malformed() -> AsyncIterator[str]:
    """A receiver whose status line is not HTTP, echoing the request line in it."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request_line = (await reader.readline()).strip()
        writer.write(b"HTTP/1.1 twohundred " + request_line + b"\r\n\r\n")
        await writer.drain()
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    async with server:
        yield webhook_url(server.sockets[0].getsockname()[1])


@contextlib.asynccontextmanager
async def plain_http_for_https() -> AsyncIterator[str]:
    async with serving(web.Application()) as port:
        yield webhook_url(port, scheme="https")


@contextlib.asynccontextmanager
async def not_found() -> AsyncIterator[str]:
    """A receiver that answers 404 with the URL it was asked for, as many error pages do: as is,
    decoded, and percent-encoded in a link."""

    async def anything(request: web.Request) -> web.Response:
        back = quote(str(request.url), safe="")
        return web.Response(
            status=404,
            text=f"no hook at {request.path_qs} (signed {request.query['sig']}); "
            f"log in: /login?next={back}",
        )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", anything)
    async with serving(app) as port:
        yield webhook_url(port)


#: Each kind of failure, the receiver producing it, and what the attempt's error says of it.
FAILURES: dict[str, tuple[Callable[[], AbstractAsyncContextManager[str]], str]] = {
    "connection refused": (nothing_listening, "connection refused: nothing listens on"),
    "timeout": (silent, "no answer within 0.2 s"),
    "redirect loop": (redirect_loop, "no answer after 10 redirects: "),
    "malformed answer": (malformed, "the receiver's answer is not valid HTTP: "),
    "TLS error": (plain_http_for_https, "no TLS answer ("),
    "non-2xx": (not_found, "HTTP 404"),
}
#: What the masked texts still tell, where the receiver's own words carry the URL.
DETAILS = {
    "redirect loop": ["/hooks/s3cr***?sig=*** -> http://127.0.0.1:", "/relay/othe***?key=***"],
    "malformed answer": ["twohundred POST /hooks/s3cr***?sig=quer*** HTTP/1.1"],
    "non-2xx": [
        "no hook at /hooks/s3cr***?sig=quer*** (signed quer***)",
        "%2Fhooks%2Fs3cr***%3Fsig%3Dquer***",
    ],
}


@pytest.mark.parametrize("kind", FAILURES)
async def test_no_failure_shows_the_urls_secrets(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="asyncsdk.sandbox")
    receiver, told = FAILURES[kind]
    async with receiver() as url:
        config = SandboxConfig(webhook_urls=(url,), webhook_max_attempts=1, webhook_timeout=0.2)
        async with Sandbox(config) as sb, sb.client() as client:
            await client.run(asyncsdk.ToolSlug.DAY_TO_DUSK, samples.path("exterior.jpg"))
            await sb.wait_idle()
            async with aiohttp.ClientSession(base_url=sb.base_url) as http:
                async with http.get("/_sandbox/") as page:
                    html = await page.text()
                async with http.get("/_sandbox/stats") as stats:
                    text = await stats.text()
                    [delivery] = (await stats.json())["deliveries"]
    lines = [r.getMessage() for r in caplog.records if r.name == "asyncsdk.sandbox"]
    assert len(lines) == 1
    for secret in SECRETS:
        assert secret not in lines[0]
        assert secret not in html
        assert secret not in text
    [attempt] = delivery["history"]
    shown = attempt["error"] or f"HTTP {attempt['status']} {attempt['answer']}"
    assert shown.startswith(told)  # the failure happened as this test means it
    assert told in lines[0]
    for detail in DETAILS.get(kind, []):
        assert detail in shown
    assert "\n" not in lines[0]
    given = yarl.URL(url)
    masked = f"{given.scheme}://hook-user:***@127.0.0.1:{given.port}/hooks/s3cr***?sig=***"
    assert delivery["url"] == masked
    assert f"from {masked} (" in lines[0]
    assert escape(masked) in html
