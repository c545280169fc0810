"""The receiver over real HTTP: mounted in a host app, served on 127.0.0.1."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families
from whtools import (
    HOOK,
    JSON,
    OLD_TOKEN,
    TOKEN,
    GatedInbox,
    Recorder,
    SwitchableInbox,
    cancellation_watch,
    encode,
    idle,
    make_receiver,
    payload,
    serve,
    wait_until,
)

from asyncsdk import ConfigurationError, ProcessCompleted
from webhooks import (
    RECEIVER_KEY,
    Inbox,
    MemoryInbox,
    NoVerification,
    SQLiteInbox,
    TokenVerifier,
    WebhookReceiver,
)

METRICS_TOKEN = "scrape-" + "m" * 24
SCRAPER = {"Authorization": f"Bearer {METRICS_TOKEN}"}


@pytest.fixture(params=["memory", "sqlite"])
async def inbox(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Inbox]:
    if request.param == "memory":
        yield MemoryInbox()
    else:
        yield SQLiteInbox(tmp_path / "hooks.sqlite3")


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


async def test_token_in_path_or_header_with_rotation() -> None:
    receiver = WebhookReceiver(
        inbox=MemoryInbox(), verifier=TokenVerifier([TOKEN, OLD_TOKEN], header="x-hook-token")
    )
    async with serve(receiver) as client:
        body = encode(payload())
        assert (await client.post(HOOK, data=body, headers=JSON)).status == 200
        old = await client.post(f"/hooks/{OLD_TOKEN}", data=encode(payload("p-2")), headers=JSON)
        assert old.status == 200
        header = await client.post(
            "/hooks/", data=encode(payload("p-3")), headers={**JSON, "X-Hook-Token": TOKEN}
        )
        assert header.status == 200
        wrong = await client.post("/hooks/" + "w" * 40, data=body, headers=JSON)
        assert wrong.status == 401
        assert (await wrong.json()) == {"error": "invalid webhook token"}
        missing = await client.post("/hooks/", data=body, headers=JSON)
        assert missing.status == 401
        assert "x-hook-token" in (await missing.json())["error"]
        assert TOKEN not in await missing.text()
    assert receiver.metrics.accepted == 3
    assert receiver.metrics.rejected["token"] == 2


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


async def test_store_unavailable_answers_503_and_loses_nothing() -> None:
    inbox = SwitchableInbox()
    receiver = make_receiver(inbox, retry_after=7)
    seen = Recorder()
    receiver.on_completed()(seen)
    async with serve(receiver) as client:
        inbox.down = True
        response = await client.post(HOOK, data=encode(payload("p-1")), headers=JSON)
        assert response.status == 503
        assert response.headers["Retry-After"] == "7"
        assert "error" in await response.json()
        inbox.down = False
        # The service retries: now accepted, not a duplicate, and handled.
        retry = await client.post(HOOK, data=encode(payload("p-1")), headers=JSON)
        assert await retry.json() == {"status": "accepted"}
        await idle(receiver)
    assert seen.ids == ["p-1"]
    assert receiver.metrics.unavailable["store_unavailable"] == 1


async def test_a_full_queue_answers_503_until_work_drains() -> None:
    receiver = make_receiver(workers=1, queue_limit=2)
    gate = asyncio.Event()
    seen = Recorder()

    @receiver.on_completed()
    async def gated(event: ProcessCompleted) -> None:
        await gate.wait()
        await seen(event)

    async with serve(receiver) as client:
        for pid in ("p-1", "p-2"):
            response = await client.post(HOOK, data=encode(payload(pid)), headers=JSON)
            assert response.status == 200
        full = await client.post(HOOK, data=encode(payload("p-3")), headers=JSON)
        assert full.status == 503
        assert full.headers["Retry-After"] == "5"
        gate.set()
        await idle(receiver)
        later = await client.post(HOOK, data=encode(payload("p-3")), headers=JSON)
        assert await later.json() == {"status": "accepted"}
        await idle(receiver)
    assert sorted(seen.ids) == ["p-1", "p-2", "p-3"]
    assert receiver.metrics.unavailable["queue_full"] == 1


async def test_metrics_route_serves_counts_and_ack_latency_to_its_scrapers_only() -> None:
    receiver = make_receiver(metrics_route=True, metrics_token=METRICS_TOKEN)
    async with serve(receiver) as client:
        await client.post(HOOK, data=encode(payload()), headers=JSON)
        await client.post(HOOK, data=encode(payload()), headers=JSON)
        await client.post(HOOK, data=b"{", headers=JSON)
        await idle(receiver)
        assert (await client.get("/hooks/metrics")).status == 401
        wrong = await client.get("/hooks/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert wrong.status == 401
        response = await client.get("/hooks/metrics", headers=SCRAPER)
        assert response.status == 200
        families = {
            family.name: family for family in text_string_to_metric_families(await response.text())
        }
    deliveries = {
        (s.labels["outcome"], s.labels["reason"]): s.value
        for s in families["webhooks_deliveries"].samples
    }
    assert deliveries == {("accepted", ""): 1, ("duplicate", ""): 1, ("rejected", "bad_json"): 1}
    entries = {s.labels["outcome"]: s.value for s in families["webhooks_entries"].samples}
    assert entries["processed"] == 1
    latency = {s.name: s.value for s in families["webhooks_ack_latency_seconds"].samples}
    assert latency["webhooks_ack_latency_seconds_count"] == 2
    assert latency["webhooks_ack_latency_seconds_sum"] > 0


def test_the_metrics_route_stays_off_unless_it_has_a_token() -> None:
    with pytest.raises(ConfigurationError, match="metrics_token"):
        make_receiver(metrics_route=True)
    with pytest.raises(ConfigurationError, match="at least 16 characters"):
        make_receiver(metrics_route=True, metrics_token="short")
    receiver = make_receiver()
    assert not [r for r in receiver.app.router.resources() if "metrics" in r.canonical]


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


async def test_a_client_hanging_up_mid_persist_loses_nothing_with_handler_cancellation() -> None:
    inbox = GatedInbox()
    receiver = make_receiver(inbox)
    seen = Recorder()
    receiver.on_completed()(seen)
    watch, cancelled = cancellation_watch()
    async with serve(receiver, middlewares=[watch]) as client:
        post = asyncio.create_task(client.post(HOOK, data=encode(payload("p-1")), headers=JSON))
        async with asyncio.timeout(10):
            await inbox.entered.wait()
        post.cancel()  # the sender gives up and closes the connection
        with pytest.raises(asyncio.CancelledError):
            await post
        async with asyncio.timeout(10):
            await cancelled.wait()
        inbox.gate.set()
        await wait_until(lambda: seen.ids == ["p-1"], "the event was stored and handled")


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
