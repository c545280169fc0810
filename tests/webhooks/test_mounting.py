"""Mounting the receiver: the routes it adds to a host app, as a sub-app too, what it refuses."""

from __future__ import annotations

import pytest
from aiohttp import web
from whtools import JSON, OLD_TOKEN, TOKEN, Recorder, encode, idle, make_receiver, payload, serve

from asyncsdk import ConfigurationError
from webhooks import MemoryInbox, NoVerification, TokenVerifier, WebhookReceiver

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
    assert plain == {f"/in/hooks/{TOKEN}", f"/in/hooks/{OLD_TOKEN}"}
    assert isinstance(mounted, web.PrefixedSubAppResource)
    # A header-only verifier adds no routes of its own.
    header_only = WebhookReceiver(inbox=MemoryInbox(), verifier=TokenVerifier(TOKEN, in_path=False))
    other = web.Application()
    header_only.setup(other)
    assert not [r for r in other.router.resources() if isinstance(r, web.PlainResource)]
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
