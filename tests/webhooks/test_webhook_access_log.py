"""No live webhook token in aiohttp's access log, whatever request line carries it."""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from whtools import encode, payload

from webhooks import (
    Delivery,
    MemoryInbox,
    RedactingAccessLogger,
    Rejection,
    TokenVerifier,
    WebhookReceiver,
)

TOKEN = "hook-" + secrets.token_urlsafe(32)
OLD_TOKEN = "old-" + secrets.token_urlsafe(32)
FORMAT = '%a "%r" %s "%{Referer}i"'


async def served(app: web.Application) -> AsyncIterator[str]:
    """``app`` served on 127.0.0.1 with the redacting access log; its base URL."""
    runner = web.AppRunner(
        app,
        access_log_class=RedactingAccessLogger,
        access_log=logging.getLogger("aiohttp.access"),
        access_log_format=FORMAT,
        handle_signals=False,
        shutdown_timeout=1.0,
    )
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def receiver() -> WebhookReceiver:
    return WebhookReceiver(
        inbox=MemoryInbox(), verifier=TokenVerifier([TOKEN, OLD_TOKEN]), poll_interval=0.05
    )


@pytest.fixture
async def base_url() -> AsyncIterator[str]:
    """A host app with the receiver set up at /hooks/, served with the redacting access log."""
    app = web.Application()

    async def home(_: web.Request) -> web.Response:
        return web.Response(text="host app")

    app.router.add_get("/", home)
    receiver().setup(app, prefix="/hooks/")
    async for url in served(app):
        yield url


@pytest.fixture
async def nested_url() -> AsyncIterator[str]:
    """The receiver set up at /hooks/ of an app that the host mounts at /api/."""
    api = web.Application()
    receiver().setup(api, prefix="/hooks/")
    app = web.Application()
    app.add_subapp("/api/", api)
    async for url in served(app):
        yield url


def escaped(token: str) -> str:
    """``token`` with its first letters percent-escaped: the same token once decoded."""
    return "".join(f"%{ord(c):02X}" for c in token[:6]) + token[6:]


@pytest.mark.parametrize(
    ("method", "target", "status"),
    [
        ("POST", f"//hooks/{TOKEN}", 404),  # a sender configured with a doubled slash
        ("POST", f"/HOOKS/{TOKEN}", 404),  # ... or in capitals
        ("POST", f"/Hooks/{OLD_TOKEN}?x=1", 404),
        ("POST", f"/webhook?token={TOKEN}", 404),  # the token in a query string
        ("GET", f"/?next=/hooks/{TOKEN}", 200),
        ("POST", f"/hooks/{TOKEN}", 200),
        ("POST", f"/hooks/{escaped(TOKEN)}", 200),
        ("POST", f"/other/{escaped(TOKEN)}", 404),
    ],
    # Named, not by their random tokens: every test process (pytest-xdist's too) collects the same.
    ids=[
        "doubled-slash",
        "capitals",
        "old-token-in-capitals",
        "in-a-query",
        "in-a-query-of-a-get",
        "live",
        "live-escaped",
        "escaped-on-another-path",
    ],
)
async def test_a_live_token_is_hidden_in_every_request_line(
    base_url: str, method: str, target: str, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="aiohttp.access")
    async with (
        aiohttp.ClientSession() as http,
        http.request(
            method,
            aiohttp.client.URL(base_url + target, encoded=True),
            data=encode(payload()),
            headers={"Content-Type": "application/json"},
        ) as response,
    ):
        assert response.status == status
        await response.read()
    lines = [r.getMessage() for r in caplog.records if r.name == "aiohttp.access"]
    assert len(lines) == 1, lines
    (line,) = lines
    assert f" {status} " in line
    assert "***" in line
    assert TOKEN not in line
    assert OLD_TOKEN not in line
    assert escaped(TOKEN) not in line


@pytest.mark.parametrize(
    ("target", "status"),
    [
        (f"/api/hooks/{TOKEN}", 200),
        (f"/API/hooks/{TOKEN}", 404),  # a miss at the host's own level
        (f"/api/HOOKS/{TOKEN}", 404),  # a miss inside the mounted app
        (f"/api/other?token={OLD_TOKEN}", 404),
    ],
    ids=["live", "host-miss", "mounted-miss", "in-a-query"],  # named, as above
)
async def test_a_live_token_is_hidden_when_the_receiver_sits_in_a_nested_app(
    nested_url: str, target: str, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="aiohttp.access")
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            nested_url + target,
            data=encode(payload()),
            headers={"Content-Type": "application/json"},
        ) as response,
    ):
        assert response.status == status
        await response.read()
    (line,) = [r.getMessage() for r in caplog.records if r.name == "aiohttp.access"]
    assert f" {status} " in line
    assert "***" in line
    assert TOKEN not in line
    assert OLD_TOKEN not in line


async def test_a_domain_sub_app_beside_the_receiver_keeps_the_redaction(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # An app added for a host name has no path prefix: the search must step over it.
    app = web.Application()
    app.add_domain("admin.example.com", web.Application())
    receiver().setup(app, prefix="/hooks/")
    caplog.set_level(logging.INFO, logger="aiohttp.access")
    async for url in served(app):
        async with aiohttp.ClientSession() as http, http.get(f"{url}/hooks/{TOKEN}") as response:
            assert response.status == 405
    (line,) = [r.getMessage() for r in caplog.records if r.name == "aiohttp.access"]
    assert "/hooks/***" in line
    assert TOKEN not in line


async def test_lines_without_a_token_are_logged_as_they_came(
    base_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="aiohttp.access")
    async with aiohttp.ClientSession() as http, http.get(f"{base_url}/?page=2") as response:
        assert response.status == 200
    (line,) = [r.getMessage() for r in caplog.records if r.name == "aiohttp.access"]
    assert '"GET /?page=2 HTTP/1.1" 200' in line


class _SecretStoreVerifier:
    """A verifier of a user's own whose tokens come from a secret store that can go down."""

    def __init__(self) -> None:
        self.store_down = False

    @property
    def path_tokens(self) -> tuple[str, ...]:
        if self.store_down:
            raise ConnectionError("the secret store is down")
        return (TOKEN,)

    def verify(self, delivery: Delivery) -> Rejection | None:
        if delivery.path_params.get("webhook_token") != TOKEN:
            return Rejection(401, "token", "invalid webhook token")
        return None


async def test_a_line_that_cannot_be_checked_for_a_token_is_withheld(
    caplog: pytest.LogCaptureFixture,
) -> None:
    verifier = _SecretStoreVerifier()
    app = web.Application()
    WebhookReceiver(inbox=MemoryInbox(), verifier=verifier).setup(app, prefix="/hooks/")
    caplog.set_level(logging.INFO, logger="aiohttp.access")
    async for url in served(app):
        verifier.store_down = True  # the delivery is accepted; its log line cannot be checked
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                f"{url}/hooks/{TOKEN}",
                data=encode(payload()),
                headers={"Content-Type": "application/json"},
            ) as response,
        ):
            assert response.status == 200
    lines = [r.getMessage() for r in caplog.records if r.name == "aiohttp.access"]
    assert lines == ["request line withheld: it could not be checked for a token"]
