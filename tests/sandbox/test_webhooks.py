"""Webhook delivery of process.completed (spec 6, decisions): fields, retries, duplicates, order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from asyncsdk.sandbox import Sandbox

from .conftest import Flow


class Receiver:
    """A tiny webhook receiver on 127.0.0.1:0 that answers from a script of statuses."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.statuses: list[int] = []  # answered in turn; 200 once the script is used up
        self.hang_first: int = 0
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.events.append(body)
        if self.hang_first > 0:
            self.hang_first -= 1
            await asyncio.sleep(5)
        status = self.statuses.pop(0) if self.statuses else 200
        return web.Response(status=status)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/hook", self.handle)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}/hook"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = Receiver()
    await r.start()
    yield r
    await r.stop()


async def test_completed_event_fields(sandbox: Sandbox, flow: Flow, receiver: Receiver) -> None:
    sandbox.register_webhook(receiver.url)
    order = await flow.order()
    pid = await flow.process("tool-day-to-dusk", order)
    await sandbox.wait_idle()
    [event] = receiver.events
    assert event["event"] == "process.completed"
    assert event["process_id"] == pid
    assert event["order_id"] == order["order_id"]
    assert event["tool"] == "tool-day-to-dusk"
    assert event["status"] == "done"
    [asset] = event["final_assets"]
    assert set(asset) == {"asset_id", "asset_type", "temp_src", "temp_thumbnail_src"}
    assert asset["asset_type"] == "image"
    async with aiohttp.ClientSession() as s, s.get(asset["temp_src"]) as r:
        assert r.status == 200
        assert r.content_type == "image/jpeg"
    [delivery] = sandbox.stats.deliveries
    assert (delivery.url, delivery.attempts, delivery.delivered) == (receiver.url, 1, True)


async def test_failed_process_event(sandbox: Sandbox, flow: Flow, receiver: Receiver) -> None:
    sandbox.config.webhook_urls = (receiver.url,)
    sandbox.config.fail_tools = frozenset({"tool-item-removal"})
    await flow.process("tool-item-removal")
    await sandbox.wait_idle()
    [event] = receiver.events
    assert event["status"] == "failed"
    assert event["final_assets"] == []


async def test_retries_on_non_2xx_until_delivered(
    sandbox: Sandbox, flow: Flow, receiver: Receiver
) -> None:
    sandbox.register_webhook(receiver.url)
    sandbox.config.webhook_retry_base = 0.01
    receiver.statuses = [500, 503, 404]
    pid = await flow.process()
    await sandbox.wait_idle()
    assert len(receiver.events) == 4
    assert {e["process_id"] for e in receiver.events} == {pid}
    [delivery] = sandbox.stats.deliveries
    assert delivery.response_statuses == [500, 503, 404, 200]
    assert delivery.attempts == 4
    assert delivery.delivered


async def test_gives_up_after_max_attempts(
    sandbox: Sandbox, flow: Flow, receiver: Receiver
) -> None:
    sandbox.register_webhook(receiver.url)
    sandbox.config.webhook_retry_base = 0.01
    sandbox.config.webhook_max_attempts = 3
    receiver.statuses = [500] * 10
    await flow.process()
    await sandbox.wait_idle()
    assert len(receiver.events) == 3
    [delivery] = sandbox.stats.deliveries
    assert (delivery.attempts, delivery.delivered) == (3, False)
    assert delivery.error == "HTTP 500"


async def test_retries_after_a_timeout(sandbox: Sandbox, flow: Flow, receiver: Receiver) -> None:
    sandbox.register_webhook(receiver.url)
    sandbox.config.webhook_timeout = 0.2
    sandbox.config.webhook_retry_base = 0.01
    receiver.hang_first = 1
    await flow.process()
    await sandbox.wait_idle()
    [delivery] = sandbox.stats.deliveries
    assert delivery.response_statuses == [None, 200]
    assert delivery.delivered


async def test_retries_when_the_receiver_is_down(sandbox: Sandbox, flow: Flow) -> None:
    down = Receiver()
    await down.start()
    url = down.url
    await down.stop()
    sandbox.register_webhook(url)
    sandbox.config.webhook_retry_base = 0.01
    sandbox.config.webhook_max_attempts = 2
    await flow.process()
    await sandbox.wait_idle()
    [delivery] = sandbox.stats.deliveries
    assert delivery.response_statuses == [None, None]
    assert not delivery.delivered


async def test_duplicates_and_fresh_urls_per_delivery(
    sandbox: Sandbox, flow: Flow, receiver: Receiver
) -> None:
    sandbox.register_webhook(receiver.url)
    sandbox.config.webhook_duplicates = 2
    pid = await flow.process()
    await sandbox.wait_idle()
    assert len(receiver.events) == 3
    keys = {(e["event"], e["process_id"], e["status"]) for e in receiver.events}
    assert keys == {("process.completed", pid, "done")}
    srcs = {e["final_assets"][0]["temp_src"] for e in receiver.events}
    assert len(srcs) == 3  # regenerated per delivery: never dedup on the body
    assert len({e["final_assets"][0]["asset_id"] for e in receiver.events}) == 1


async def test_out_of_order_delivery(sandbox: Sandbox, flow: Flow, receiver: Receiver) -> None:
    sandbox.register_webhook(receiver.url)
    sandbox.config.webhook_out_of_order = True
    sandbox.config.webhook_max_jitter = 0.3
    order = await flow.order()
    created = [await flow.process("tool-day-to-dusk", order) for _ in range(8)]
    await sandbox.wait_idle()
    received = [e["process_id"] for e in receiver.events]
    assert sorted(received) == sorted(created)
    finished = [d.process_id for d in sandbox.stats.deliveries]
    assert received != finished  # seed 0 reorders these eight


async def test_every_registered_url_receives(sandbox: Sandbox, flow: Flow) -> None:
    a, b = Receiver(), Receiver()
    await a.start()
    await b.start()
    try:
        sandbox.config.webhook_urls = (a.url,)
        async with aiohttp.ClientSession() as s:
            async with s.post(f"{sandbox.base_url}/_sandbox/webhooks", json={"url": b.url}) as r:
                assert r.status == 201
                assert set((await r.json())["webhook_urls"]) == {a.url, b.url}
            async with s.post(
                f"{sandbox.base_url}/_sandbox/webhooks", json={"url": "ftp://x"}
            ) as r:
                assert r.status == 400
        await flow.process()
        await sandbox.wait_idle()
        assert len(a.events) == len(b.events) == 1
    finally:
        await a.stop()
        await b.stop()


def test_register_webhook_refuses_other_schemes() -> None:
    with pytest.raises(ValueError, match="https"):
        Sandbox().register_webhook("ftp://example.com/hook")
