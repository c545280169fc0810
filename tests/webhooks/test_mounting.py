"""Mounting the receiver: the routes it adds to a host app, as a sub-app too, what it refuses."""

from __future__ import annotations

import logging

import pytest
from aiohttp import web
from whtools import JSON, OLD_TOKEN, TOKEN, Recorder, encode, idle, make_receiver, payload, serve

from asyncsdk import ConfigurationError
from webhooks import MemoryInbox, NoVerification, TokenVerifier, Verifier, WebhookReceiver

METRICS_TOKEN = "scrape-" + "m" * 24
SCRAPER = {"Authorization": f"Bearer {METRICS_TOKEN}"}


async def test_setup_routes_each_path_token_on_the_host_app() -> None:
    """Each token's exact URL resolves on the host app; the rest of the prefix stays mounted."""

    def build() -> WebhookReceiver:
        return WebhookReceiver(
            inbox=MemoryInbox(),
            verifier=TokenVerifier([TOKEN, OLD_TOKEN]),
            metrics_route=True,
            metrics_token=METRICS_TOKEN,
        )

    app = web.Application()
    once = build()
    mounted = once.setup(app, prefix="/in/hooks")
    with pytest.raises(ConfigurationError, match="mounted already"):
        once.setup(web.Application())
    plain = {r.canonical for r in app.router.resources() if isinstance(r, web.PlainResource)}
    # and the prefix without its slash, answered 404 with the URL to deliver to
    assert plain == {f"/in/hooks/{TOKEN}", f"/in/hooks/{OLD_TOKEN}", "/in/hooks"}
    assert isinstance(mounted, web.PrefixedSubAppResource)
    # A header-only verifier adds no token routes.
    header_only = WebhookReceiver(inbox=MemoryInbox(), verifier=TokenVerifier(TOKEN, in_path=False))
    other = web.Application()
    header_only.setup(other)
    plain_there = [r for r in other.router.resources() if isinstance(r, web.PlainResource)]
    assert [r.canonical for r in plain_there] == ["/hooks"]
    receiver = build()
    async with serve(receiver, prefix="/in/hooks/") as client:
        for token in (TOKEN, OLD_TOKEN):
            answer = await client.post(
                f"/in/hooks/{token}", data=encode(payload(f"p-{token[:3]}")), headers=JSON
            )
            assert answer.status == 200
        wrong = await client.post("/in/hooks/" + "w" * 40, data=encode(payload()), headers=JSON)
        assert wrong.status == 401
        scrape = await client.get("/in/hooks/metrics", headers=SCRAPER)
        assert scrape.status == 200
    assert receiver.metrics.accepted == 2


async def test_the_sub_app_mounts_with_add_subapp_too() -> None:
    receiver = make_receiver()
    seen = Recorder()
    receiver.on_completed()(seen)
    app = web.Application()
    app.add_subapp("/incoming/", receiver.app)
    from aiohttp.test_utils import TestClient, TestServer

    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        response = await client.post(f"/incoming/{TOKEN}", data=encode(payload()), headers=JSON)
        assert response.status == 200
        await idle(receiver)
    assert seen.ids == ["proc-1"]
    assert not receiver.running


def test_misconfiguration_names_the_fix() -> None:
    with pytest.raises(ConfigurationError, match="SQLiteInbox"):
        WebhookReceiver(inbox=object(), verifier=NoVerification())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="TokenVerifier"):
        WebhookReceiver(inbox=MemoryInbox(), verifier=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="workers"):
        WebhookReceiver(inbox=MemoryInbox(), verifier=NoVerification(), workers=0)
    with pytest.raises(ConfigurationError, match="10 seconds"):
        WebhookReceiver(inbox=MemoryInbox(), verifier=NoVerification(), put_timeout=9)


@pytest.mark.parametrize(
    ("path", "verifier", "expected"),
    [
        ("/hooks", TokenVerifier(TOKEN), "/hooks/<token>"),  # the prefix without its slash
        (f"/hooks/{TOKEN}/", TokenVerifier(TOKEN), "/hooks/<token>"),  # a slash after the token
        (f"/hooks/{TOKEN}/extra", TokenVerifier(TOKEN), "/hooks/<token>"),
        ("/hooks", NoVerification(), "/hooks/"),  # a receiver without a token in its URL
    ],
)
async def test_a_delivery_near_the_receiver_s_url_is_told_the_url(
    path: str, verifier: Verifier, expected: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A sender retries every non-2xx: a misconfigured URL gets a 404 whose body says where to
    deliver, and the operator one log line (not one per retry), without the path's token."""
    receiver = WebhookReceiver(inbox=MemoryInbox(), verifier=verifier)
    caplog.set_level(logging.WARNING, logger="webhooks")
    async with serve(receiver) as client:
        for _ in range(3):  # the sender's retries
            response = await client.post(path, data=encode(payload("p-1")), headers=JSON)
            assert response.status == 404
            assert await response.json() == {
                "error": f"no webhook receiver at this URL: deliver to {expected}"
            }
        assert await receiver.inbox.pending_count() == 0
    [line] = [r.getMessage() for r in caplog.records if r.name == "webhooks"]
    assert f"its sender will retry it until its URL is {expected}" in line
    assert TOKEN not in line
