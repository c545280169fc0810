"""The receiver over real HTTP: mounted in a host app, served on 127.0.0.1."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from store_places import place_for, store_params
from whtools import HOOK, JSON, Recorder, encode, idle, make_receiver, payload, serve, wait_until

from asyncsdk import ProcessCompleted
from webhooks import RECEIVER_KEY, Inbox


@pytest.fixture(params=store_params(shared=False))
async def inbox(request: pytest.FixtureRequest, tmp_path: Path) -> Inbox:
    """Each store one process owns (the shared ones have suites of their own)."""
    return place_for(request.param, request, tmp_path).inbox()


async def test_a_delivery_is_acked_then_handled(inbox: Inbox) -> None:
    receiver = make_receiver(inbox)
    seen = Recorder()
    receiver.on_completed()(seen)
    async with serve(receiver) as client:
        assert client.app[RECEIVER_KEY] is receiver
        response = await client.post(HOOK, data=encode(payload("p-1")), headers=JSON)
        assert response.status == 200
        assert await response.json() == {"status": "accepted"}
        await wait_until(lambda: seen.ids == ["p-1"], "the handler ran")
        assert seen.events[0].final_assets[0].src.startswith("https://cdn.example/p-1")
        await idle(receiver)
        assert receiver.metrics.processed == 1
        # The host app still serves its own routes.
        assert await (await client.get("/")).text() == "host app"


async def test_a_handler_sleeping_30_s_does_not_delay_the_ack() -> None:
    receiver = make_receiver(workers=2, drain_timeout=0.05)
    started, finished = asyncio.Event(), asyncio.Event()

    @receiver.on_completed()
    async def slow(event: ProcessCompleted) -> None:
        started.set()
        await asyncio.sleep(30)
        finished.set()

    async with serve(receiver) as client:
        first = await client.post(HOOK, data=encode(payload("p-slow")), headers=JSON)
        assert first.status == 200
        async with asyncio.timeout(10):
            await started.wait()
        second = await client.post(HOOK, data=encode(payload("p-next")), headers=JSON)
        assert second.status == 200
        assert await second.json() == {"status": "accepted"}
        # Acked while a handler is mid-sleep.
        assert started.is_set()
        assert not finished.is_set()


async def test_50_concurrent_duplicates_reach_the_handler_once(inbox: Inbox) -> None:
    receiver = make_receiver(inbox, workers=4)
    seen = Recorder()
    receiver.on_completed()(seen)
    async with serve(receiver) as client:

        async def deliver(n: int) -> str:
            # Each delivery carries freshly signed result URLs, as the service's retries do.
            body = payload("p-dup")
            body["final_assets"][0]["temp_src"] += f"&n={n}"
            response = await client.post(HOOK, data=encode(body), headers=JSON)
            assert response.status == 200
            answer: dict[str, str] = await response.json()
            return answer["status"]

        answers = await asyncio.gather(*(deliver(n) for n in range(50)))
        assert answers.count("accepted") == 1
        assert answers.count("duplicate") == 49
        await idle(receiver)
        assert seen.ids == ["p-dup"]
        assert receiver.metrics.duplicate == 49


async def test_each_status_of_a_process_is_its_own_event() -> None:
    receiver = make_receiver()
    seen = Recorder()
    receiver.on_completed()(seen)
    async with serve(receiver) as client:
        for status in ("failed", "done", "failed"):
            response = await client.post(
                HOOK, data=encode(payload("p-1", status=status)), headers=JSON
            )
            assert response.status == 200
        await idle(receiver)
        assert sorted(e.status for e in seen.events) == ["done", "failed"]


def nested(depth: int) -> bytes:
    return b'{"event": "process.completed", "x": ' + b"[" * depth + b"]" * depth + b"}"


JSON_CT = "application/json"
BAD_INPUTS = [
    ("wrong types", encode({**payload(), "process_id": 12}), JSON, 400, "process_id"),
    ("truncated JSON", encode(payload())[:-7], JSON, 400, "not valid JSON"),
    ("wrong content type", encode(payload()), {"Content-Type": "text/plain"}, 415, "json"),
    ("form content type", b"a=b", {"Content-Type": "application/x-www-form-urlencoded"}, 415, ""),
    ("non-UTF-8", b'{"event": "process.completed\xff"}', JSON, 400, "UTF-8"),
    ("deeply nested", nested(100_000), JSON, 400, "nests"),
    ("empty body", b"", JSON, 400, "empty"),
    ("array body", b"[]", JSON, 400, "object"),
    ("missing field", encode({"event": "process.completed", "process_id": "p"}), JSON, 400, ""),
    (
        "bad charset",
        encode(payload()),
        {"Content-Type": "application/json; charset=utf-16"},
        415,
        "",
    ),
]


@pytest.mark.parametrize(
    ("body", "headers", "status", "words"),
    [case[1:] for case in BAD_INPUTS],
    ids=[case[0] for case in BAD_INPUTS],
)
async def test_bad_inputs_get_a_4xx_with_a_reason(
    body: bytes, headers: dict[str, str], status: int, words: str
) -> None:
    receiver = make_receiver(max_body=2_000_000)
    seen = Recorder()
    receiver.on_completed()(seen)
    async with serve(receiver) as client:
        response = await client.post(HOOK, data=body, headers=headers)
        assert response.status == status
        error = (await response.json())["error"]
        assert error
        assert words.lower() in error.lower()
        assert sum(receiver.metrics.rejected.values()) == 1
        # Still healthy afterwards.
        ok = await client.post(HOOK, data=encode(payload()), headers=JSON)
        assert ok.status == 200
    assert seen.ids == ["proc-1"]


@pytest.mark.parametrize("client_max_size", [1024, 100 * 1024 * 1024])
async def test_a_10_mb_body_gets_413_whatever_the_host_limit(client_max_size: int) -> None:
    receiver = make_receiver()
    big = b'{"event": "process.completed", "pad": "' + b"x" * 10_000_000 + b'"}'
    async with serve(receiver, client_max_size=client_max_size) as client:
        response = await client.post(HOOK, data=io.BytesIO(big), headers=JSON)
        assert response.status == 413
        assert "exceeds" in (await response.json())["error"]

        async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: caught while reading
            for _ in range(160):
                yield b"x" * 65536

        response = await client.post(HOOK, data=chunked(), headers=JSON)
        assert response.status == 413
        # A normal delivery passes even when the host app's own limit is tiny.
        small = await client.post(HOOK, data=encode(payload()), headers=JSON)
        assert small.status == 200
    assert receiver.metrics.rejected["too_large"] == 2


async def test_an_unknown_event_type_is_acked_and_ignored() -> None:
    receiver = make_receiver()
    seen = Recorder()
    receiver.on_completed()(seen)
    async with serve(receiver) as client:
        response = await client.post(
            HOOK, data=b'{"event": "process.started", "process_id": 3}', headers=JSON
        )
        assert response.status == 200
        assert await response.json() == {"status": "ignored"}
        await idle(receiver)
    assert seen.ids == []
    assert receiver.metrics.ignored["unknown_event"] == 1


async def test_the_registry_wakes_waiters_before_handlers_and_tracks_health() -> None:
    from webhooks import Registry

    async with Registry() as registry:
        receiver = make_receiver(registry=registry)
        order: list[str] = []

        @receiver.on_completed()
        async def handler(event: ProcessCompleted) -> None:
            # The waiter was resolved before any handler ran: a few loop turns let it finish.
            for _ in range(5):
                await asyncio.sleep(0)
            order.append("handler" if waiter.done() else "handler-before-registry")

        assert not registry.healthy
        async with serve(receiver) as client:
            assert registry.healthy
            waiter = asyncio.create_task(registry.wait("p-1", timeout=10))
            await asyncio.sleep(0)
            await client.post(HOOK, data=encode(payload("p-1")), headers=JSON)
            event = await waiter
            assert (event.process_id, event.status) == ("p-1", "done")
            await idle(receiver)
        assert order == ["handler"]
        assert not registry.healthy
