"""Fetch-back: handlers get the API's answer, so a forged delivery changes nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from whtools import JSON, Recorder, encode, idle, payload, serve, wait_until

import asyncsdk
from asyncsdk import NotFoundError, Order, Process, ProcessCompleted, ServerError, structure
from webhooks import MemoryInbox, NoVerification, WebhookReceiver


class FakeApi:
    """GET /v3/process/{id} and /v3/order/{id} answering from what the test sets; counts the
    process requests in ``gets`` and the order requests in ``order_gets``.

    Every process belongs to ``order-1`` unless ``orders`` says otherwise.
    """

    def __init__(self) -> None:
        self.processes: dict[str, dict[str, Any]] = {}
        self.orders: dict[str, list[str]] = {}
        self.gets: list[str] = []
        self.order_gets: list[str] = []
        self.fail_next = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/v3/process/{id}", self.get_process)
        app.router.add_get("/v3/order/{id}", self.get_order)
        return app

    async def get_order(self, request: web.Request) -> web.Response:
        order_id = request.match_info["id"]
        self.order_gets.append(order_id)
        if request.headers.get("x-api-key") != "test-key":
            return web.json_response({"error": "bad key", "key": "api_error_auth"}, status=401)
        if order_id.startswith("malformed-"):
            return web.json_response(
                {"error": "invalid order id", "key": "api_error_invalid_field"}, status=400
            )
        listed = self.orders.get(order_id)
        if listed is None and order_id == "order-1":
            listed = [pid for pid in self.processes if not self._listed_elsewhere(pid)]
        if listed is None:
            return web.json_response(
                {"error": "order not found", "key": "api_error_not_found"}, status=404
            )
        processes = [self.processes[pid] for pid in listed if pid in self.processes]
        return web.json_response({"id": order_id, "processes": processes})

    def _listed_elsewhere(self, process_id: str) -> bool:
        return any(process_id in listed for listed in self.orders.values())

    async def get_process(self, request: web.Request) -> web.Response:
        process_id = request.match_info["id"]
        self.gets.append(process_id)
        if request.headers.get("x-api-key") != "test-key":
            return web.json_response({"error": "bad key", "key": "api_error_auth"}, status=401)
        if self.fail_next:
            self.fail_next -= 1
            return web.json_response({"error": "oops", "key": "api_error_internal"}, status=500)
        if process_id not in self.processes:
            return web.json_response(
                {"error": "process not found", "key": "api_error_not_found"}, status=404
            )
        return web.json_response(self.processes[process_id])


class ApiProcesses:
    """The smallest ``processes.get`` over HTTP: the shape ``asyncsdk.Client`` offers."""

    def __init__(self, session: aiohttp.ClientSession, base: str) -> None:
        self._session = session
        self.base = base

    async def get(self, process_id: str) -> Process:
        url = f"{self.base}/v3/process/{process_id}"
        async with self._session.get(url, headers={"x-api-key": "test-key"}) as response:
            body = await response.json()
            if response.status == 404:
                raise NotFoundError(body["error"], status=404, key=body["key"])
            if response.status >= 500:
                raise ServerError(body["error"], status=response.status)
            return structure(body, Process)


class ApiOrders:
    """The smallest ``orders.get`` over HTTP."""

    def __init__(self, session: aiohttp.ClientSession, base: str) -> None:
        self._session = session
        self._base = base

    async def get(self, order_id: str) -> Order:
        url = f"{self._base}/v3/order/{order_id}"
        async with self._session.get(url, headers={"x-api-key": "test-key"}) as response:
            body = await response.json()
            if response.status == 404:
                raise NotFoundError(body["error"], status=404, key=body["key"])
            return structure(body, Order)


class ApiClient:
    def __init__(self, session: aiohttp.ClientSession, base: str) -> None:
        self.processes = ApiProcesses(session, base)
        self.orders = ApiOrders(session, base)


@pytest.fixture
async def api() -> AsyncIterator[tuple[FakeApi, ApiClient]]:
    fake = FakeApi()
    async with TestServer(fake.app(), host="127.0.0.1") as server, aiohttp.ClientSession() as s:
        yield fake, ApiClient(s, str(server.make_url("")).rstrip("/"))


def api_process(process_id: str, status: str) -> dict[str, Any]:
    assets = (
        [{"asset_id": "real", "src": f"https://api.example/{process_id}.jpg", "thumbnail_src": ""}]
        if status == "done"
        else []
    )
    return {
        "id": process_id,
        "tool": "tool-virtual-staging",
        "status": status,
        "final_assets": assets,
        "bookmarked": False,
    }


def make(client: ApiClient, **options: Any) -> WebhookReceiver:
    return WebhookReceiver(
        inbox=MemoryInbox(),
        verifier=NoVerification(),
        client=client,
        poll_interval=0.05,
        **options,
    )


async def test_a_forged_done_reaches_handlers_as_the_apis_failed(
    api: tuple[FakeApi, ApiClient],
) -> None:
    fake, client = api
    fake.processes["p-1"] = api_process("p-1", "failed")
    receiver = make(client)
    seen = Recorder()
    receiver.on_completed()(seen)
    async with serve(receiver) as http:
        forged = payload("p-1", status="done")
        response = await http.post("/hooks/", data=encode(forged), headers=JSON)
        assert response.status == 200
        await idle(receiver)
        assert [(e.process_id, e.status, e.final_assets) for e in seen.events] == [
            ("p-1", "failed", ())
        ]
        # The genuine "failed" delivery that follows is stored to be checked, then found to be
        # what handlers already saw: the API's event holds the dedup key.
        genuine = await http.post(
            "/hooks/", data=encode(payload("p-1", status="failed")), headers=JSON
        )
        assert genuine.status == 200
        await idle(receiver)
    assert len(seen.events) == 1
    assert receiver.metrics.rewritten == 1


async def test_handlers_get_the_apis_result_urls(api: tuple[FakeApi, ApiClient]) -> None:
    fake, client = api
    fake.processes["p-1"] = api_process("p-1", "done")
    receiver = make(client)
    seen = Recorder()
    receiver.on_completed(status="done")(seen)
    async with serve(receiver) as http:
        await http.post("/hooks/", data=encode(payload("p-1")), headers=JSON)
        await idle(receiver)
    (event,) = seen.events
    assert event.final_assets[0].src == "https://api.example/p-1.jpg"
    assert event.order_id == "order-1"  # the order lists the process
    assert fake.order_gets == ["order-1"]
    assert fake.gets == ["p-1"]


async def test_an_unknown_process_is_dropped_as_forged(api: tuple[FakeApi, ApiClient]) -> None:
    _, client = api
    receiver = make(client)
    seen = Recorder()
    receiver.on_completed()(seen)
    async with serve(receiver) as http:
        response = await http.post("/hooks/", data=encode(payload("nope")), headers=JSON)
        assert response.status == 200  # acked: a retry storm would not make it real
        await idle(receiver)
    assert seen.events == []
    assert receiver.metrics.forged == 1


async def test_an_id_the_api_refuses_as_invalid_is_dropped_as_forged_not_retried(
    api: tuple[FakeApi, ApiClient],
) -> None:
    # The real client over HTTP: a 400 about the order id is the API saying it never gave it.
    fake, client = api
    base = client.processes.base
    async with asyncsdk.Client(api_key="test-key", base_url=base, max_retries=0) as real:
        receiver = make(real, retry_base=0.01, retry_cap=0.02)
        seen = Recorder()
        receiver.on_completed()(seen)
        async with serve(receiver) as http:
            delivery = payload("p-1", order_id="malformed-order")
            assert (await http.post("/hooks/", data=encode(delivery), headers=JSON)).status == 200
            await idle(receiver)
    assert seen.events == []
    assert receiver.metrics.forged == 1
    assert receiver.metrics.dead_lettered == 0
    assert fake.order_gets == ["malformed-order"]  # asked once: nothing to retry


async def test_a_refused_api_key_is_retried_not_taken_for_a_forgery(
    api: tuple[FakeApi, ApiClient],
) -> None:
    fake, client = api
    fake.processes["p-1"] = api_process("p-1", "done")
    async with asyncsdk.Client(
        api_key="wrong-key", base_url=client.processes.base, max_retries=0
    ) as real:
        receiver = make(real, retry_base=0.01, retry_cap=0.02, max_attempts=2)
        seen = Recorder()
        receiver.on_completed()(seen)
        async with serve(receiver) as http:
            assert (await http.post("/hooks/", data=encode(payload("p-1")), headers=JSON)).ok
            await idle(receiver)
    assert seen.events == []
    assert receiver.metrics.forged == 0
    assert receiver.metrics.dead_lettered == 1  # kept for a replay once the key is fixed
    assert fake.order_gets == ["order-1", "order-1"]  # each attempt asked, and was refused
    assert fake.gets == []


async def test_a_process_still_running_is_asked_about_again(
    api: tuple[FakeApi, ApiClient],
) -> None:
    fake, client = api
    fake.processes["p-1"] = api_process("p-1", "processing")
    registry_events: list[ProcessCompleted] = []

    class Sink:
        async def resolve(self, event: ProcessCompleted) -> None:
            registry_events.append(event)

    receiver = make(client, not_finished_delay=0.05, registry=Sink())
    seen = Recorder()
    receiver.on_completed()(seen)
    async with serve(receiver) as http:
        await http.post("/hooks/", data=encode(payload("p-1")), headers=JSON)
        await wait_until(lambda: len(fake.order_gets) >= 2, "a second look at the process")
        assert seen.events == []
        assert registry_events == []
        fake.processes["p-1"] = api_process("p-1", "done")
        await idle(receiver)
    assert [e.status for e in seen.events] == ["done"]
    assert registry_events == seen.events


async def test_api_errors_are_retried(api: tuple[FakeApi, ApiClient]) -> None:
    fake, client = api
    fake.processes["p-1"] = api_process("p-1", "done")
    fake.fail_next = 2
    receiver = make(client, retry_base=0.01, retry_cap=0.02)
    seen = Recorder()
    receiver.on_completed()(seen)
    async with serve(receiver) as http:
        await http.post("/hooks/", data=encode(payload("p-1")), headers=JSON)
        await idle(receiver)
    assert seen.ids == ["p-1"]
    assert fake.gets == ["p-1"] * 3
    assert receiver.metrics.failed == 2


@pytest.mark.parametrize("forged_order", ["order-9", "no-such-order"])
async def test_a_forged_done_naming_another_order_neither_reaches_handlers_nor_blocks_the_genuine(
    api: tuple[FakeApi, ApiClient], forged_order: str
) -> None:
    fake, client = api
    fake.processes["p-1"] = api_process("p-1", "done")
    fake.processes["p-9"] = api_process("p-9", "done")
    fake.orders = {"order-1": ["p-1"], "order-9": ["p-9"]}  # order-9: another customer's
    resolved: list[ProcessCompleted] = []

    class Sink:
        async def resolve(self, event: ProcessCompleted) -> None:
            resolved.append(event)

    receiver = make(client, registry=Sink())
    seen = Recorder()
    receiver.on_completed()(seen)
    async with serve(receiver) as http:
        forged = payload("p-1", order_id=forged_order)
        assert (await http.post("/hooks/", data=encode(forged), headers=JSON)).status == 200
        await idle(receiver)
        assert seen.events == []
        genuine = await http.post("/hooks/", data=encode(payload("p-1")), headers=JSON)
        assert await genuine.json() == {"status": "accepted"}
        await idle(receiver)
        retry = await http.post("/hooks/", data=encode(payload("p-1")), headers=JSON)
        assert await retry.json() == {"status": "duplicate"}
    assert [(e.process_id, e.order_id, e.status) for e in seen.events] == [
        ("p-1", "order-1", "done")
    ]
    assert seen.events[0].final_assets[0].src == "https://api.example/p-1.jpg"
    assert resolved == seen.events
    assert receiver.metrics.forged == 1
