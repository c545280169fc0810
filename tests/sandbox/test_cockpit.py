"""The sandbox's page at ``/_sandbox/``, read in a real headless Chromium: the processes made
through ``asyncsdk.Client`` with their thumbnails, and every webhook delivery, failures first,
with the receiver's answer to each attempt.  And the same facts as plain HTTP sees them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from browser import chromium

import asyncsdk
from asyncsdk import samples
from asyncsdk.sandbox import Sandbox, SandboxConfig

TOKEN = "s3cret-token-0123456789"
WRONG = "wrong-token-9876543210"
STAGING = {"space": "bedroom", "style": "modern"}


@contextlib.asynccontextmanager
async def receiver() -> AsyncIterator[str]:
    """A receiver on a free port of 127.0.0.1 that accepts ``/hooks/TOKEN`` (200) and answers
    401 with a JSON reason to any other token; yields its base URL."""

    async def hook(request: web.Request) -> web.Response:
        await request.read()
        if request.match_info["token"] != TOKEN:
            return web.json_response({"error": "unknown webhook token"}, status=401)
        return web.json_response({"accepted": True})

    app = web.Application()
    app.router.add_post("/hooks/{token}", hook)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def config(base: str) -> SandboxConfig:
    return SandboxConfig(
        webhook_urls=(f"{base}/hooks/{TOKEN}", f"{base}/hooks/{WRONG}"),
        webhook_retry_base=0.01,
        webhook_max_attempts=3,
    )


async def two_processes(sb: Sandbox) -> list[asyncsdk.Process]:
    async with sb.client() as client:
        staged = await client.run(
            asyncsdk.ToolSlug.VIRTUAL_STAGING, samples.path("bedroom-empty.jpg"), widgets=STAGING
        )
        dusk = await client.run(asyncsdk.ToolSlug.DAY_TO_DUSK, samples.path("exterior.jpg"))
    await sb.wait_idle()
    return [staged, dusk]


async def test_the_page_shows_processes_thumbnails_and_the_failed_delivery_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with receiver() as base, Sandbox(config(base)) as sb:
        processes = await two_processes(sb)
        async with chromium(tmp_path / "profile") as browser:
            watched = await browser.open()
            await watched.visit(f"{sb.base_url}/_sandbox/")
            page = watched.page

            rows = page.locator("tr.process")
            assert sorted(await rows.evaluate_all("(rows) => rows.map((r) => r.dataset.id)")) == (
                sorted(p.id for p in processes)
            )
            assert await rows.locator(".badge").all_inner_texts() == ["done", "done"]
            # Before and after of each process, drawn: every thumbnail loaded.
            widths = await page.locator("img.thumb").evaluate_all(
                "(images) => Promise.all(images.map((i) => i.decode().then(() => i.naturalWidth)))"
            )
            assert len(widths) == 4
            assert all(width > 0 for width in widths)

            deliveries = page.locator(".delivery")
            states = await deliveries.evaluate_all("(ds) => ds.map((d) => d.dataset.state)")
            assert states == ["failed", "failed", "delivered", "delivered"]
            first = await deliveries.first.inner_text()
            assert "HTTP 401" in first
            assert "unknown webhook token" in first  # the receiver's answer, not just a number
            assert "3 of 3 attempts" in first
            assert "gave up" in first
            assert "/hooks/wron***" in first
            assert WRONG not in await page.content()  # the token stays masked
            assert "HTTP 200" in await deliveries.last.inner_text()

            # Live: a process created while the page is open shows up without a reload.
            async with sb.client() as client:
                third = await client.run(asyncsdk.ToolSlug.DAY_TO_DUSK, samples.path("kitchen.jpg"))
            await sb.wait_idle()
            await page.wait_for_function(
                "(id) => document.querySelector(`tr.process[data-id='${id}']`) !== null",
                arg=third.id,
                timeout=10_000,
            )
            await page.wait_for_function(
                "() => document.querySelectorAll('.delivery').length === 6", timeout=10_000
            )
            shot = await watched.screenshot(tmp_path / "screenshots" / "sandbox.png")
            await page.close()
            assert watched.errors == []
    with capsys.disabled():
        print(f"\nscreenshot of the sandbox page: {shot}")


async def test_the_page_answers_before_anything_happened(sandbox: Sandbox) -> None:
    async with aiohttp.ClientSession() as http, http.get(f"{sandbox.base_url}/_sandbox/") as page:
        assert page.status == 200
        assert page.content_type == "text/html"
        text = await page.text()
    assert "No process yet" in text
    assert "no webhook URL is set (--webhook URL, or POST /_sandbox/webhooks)" in text


async def test_the_page_address_typed_without_its_slash_leads_to_the_page(
    sandbox: Sandbox,
) -> None:
    async with aiohttp.ClientSession() as http, http.get(f"{sandbox.base_url}/_sandbox") as page:
        assert page.status == 200
        assert page.url.path == "/_sandbox/"
        assert "No process yet" in await page.text()
    assert sandbox.stats.requests == {}  # a control route, like the page itself


async def test_the_page_is_not_counted_among_the_services_requests() -> None:
    async with receiver() as base, Sandbox(config(base)) as sb:
        await two_processes(sb)
        before = dict(sb.stats.requests)
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{sb.base_url}/_sandbox/") as page:
                text = await page.text()
            thumbnails = [part.split('"')[0] for part in text.split('src="')[1:]]
            assert len(thumbnails) == 4
            for src in thumbnails:
                async with http.get(f"{sb.base_url}{src}") as image:
                    assert image.status == 200
                    assert image.content_type == "image/jpeg"
        assert dict(sb.stats.requests) == before


async def test_a_receivers_answer_is_shown_as_text_never_run() -> None:
    hostile = '<img src=x onerror="document.title=1"><script>alert(1)</script>'

    async def hook(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=500, text=hostile, content_type="text/html")

    app = web.Application()
    app.router.add_post("/hooks/{token}", hook)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/hooks/{TOKEN}"
    try:
        config = SandboxConfig(webhook_urls=(url,), webhook_max_attempts=1)
        async with Sandbox(config) as sb:
            async with sb.client() as client:
                await client.run(asyncsdk.ToolSlug.DAY_TO_DUSK, samples.path("exterior.jpg"))
            await sb.wait_idle()
            async with aiohttp.ClientSession() as http, http.get(f"{sb.base_url}/_sandbox/") as r:
                text = await r.text()
    finally:
        await runner.cleanup()
    assert "HTTP 500" in text
    assert "&lt;img src=x onerror=&quot;document.title=1&quot;&gt;&lt;script&gt;" in text
    assert hostile not in text


async def test_a_delivery_still_retrying_shows_when_it_is_tried_next() -> None:
    async with receiver() as base:
        config = SandboxConfig(
            webhook_urls=(f"{base}/hooks/{WRONG}",), webhook_retry_base=60, webhook_max_attempts=3
        )
        async with Sandbox(config) as sb:
            async with sb.client() as client:
                await client.run(asyncsdk.ToolSlug.DAY_TO_DUSK, samples.path("exterior.jpg"))
            async with asyncio.timeout(10):
                # The first attempt is recorded by the sandbox once the answer is read.
                while not sb.stats.deliveries or not sb.stats.deliveries[0].history:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
            async with aiohttp.ClientSession() as http, http.get(f"{sb.base_url}/_sandbox/") as r:
                text = await r.text()
            sent = sb.stats.deliveries[0].history[0].at
    retry = datetime.strptime(sent, "%Y-%m-%dT%H:%M:%S.%fZ") + timedelta(seconds=60)
    assert 'data-state="retrying"' in text
    assert "1 of 3 attempts" in text
    assert f"next try at {retry:%H:%M:%S}" in text
