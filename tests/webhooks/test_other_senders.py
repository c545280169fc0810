"""Any sender's webhooks, signed by the real sender libraries, on every inbox backend.

The ``svix`` and ``standardwebhooks`` packages sign the deliveries, as Svix (with its own
``svix-*`` header names) and the Standard Webhooks senders (``webhook-*``) do in production; an
:class:`EventReceiver` verifies them, stores each once per message id, and runs its handlers by
event type.  Also here: a receiver process killed with SIGKILL and started again handles each
message once, on SQLite, Redis and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import logging
import signal
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import standardwebhooks
import svix.webhooks
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from codeblocks import run_block
from node_process import node_running
from store_places import Place, place_for
from whtools import JSON, TOKEN, encode, eventually, idle, payload, recorded, serve, wait_until

from asyncsdk import ConfigurationError, ProcessCompleted
from webhooks import (
    EventReceiver,
    MemoryInbox,
    ReceiverTelemetry,
    RedactingAccessLogger,
    SQLiteInbox,
    StandardWebhooksVerifier,
    TokenVerifier,
    WebhookEvent,
    WebhookReceiver,
)
from webhooks.stores import store_named

SCRIPT = Path(__file__).with_name("event_receiver_script.py")
ROOT = Path(__file__).resolve().parents[2]
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # as event_receiver_script.py
OTHER_SECRET = "whsec_" + base64.b64encode(b"another-key-of-32-bytes-exactly!").decode()

Sign = Callable[[str, str, int, bytes], str]


def sign_with_svix(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    when = datetime.datetime.fromtimestamp(timestamp, datetime.UTC)
    return svix.webhooks.Webhook(secret).sign(msg_id, when, body.decode())


def sign_with_standardwebhooks(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    when = datetime.datetime.fromtimestamp(timestamp, datetime.UTC)
    return standardwebhooks.Webhook(secret).sign(msg_id, when, body.decode())


SENDERS = [
    pytest.param(sign_with_svix, id="svix"),
    pytest.param(sign_with_standardwebhooks, id="standardwebhooks"),
]
#: The header names each library's senders use: Svix's own by default, the standard's otherwise.
HEADER_PREFIX = {sign_with_svix: "svix", sign_with_standardwebhooks: "webhook"}


def signed(
    sign: Sign, msg_id: str, body: bytes, *, secret: str = SECRET, timestamp: int | None = None
) -> dict[str, str]:
    """The headers the sender of ``sign``'s library puts on a delivery, signed by the library."""
    ts = int(time.time()) if timestamp is None else timestamp
    prefix = HEADER_PREFIX[sign]
    return {
        **JSON,
        f"{prefix}-id": msg_id,
        f"{prefix}-timestamp": str(ts),
        f"{prefix}-signature": sign(secret, msg_id, ts, body),
    }


def envelope(event_type: str, **data: Any) -> bytes:
    """A body as Standard Webhooks senders send it: type, timestamp, data."""
    body = {"type": event_type, "timestamp": "2026-11-27T12:00:00.000000Z", "data": data}
    return json.dumps(body, ensure_ascii=False).encode()


class Seen:
    """A handler that records the events it gets."""

    def __init__(self) -> None:
        self.events: list[WebhookEvent] = []

    async def __call__(self, event: WebhookEvent) -> None:
        self.events.append(event)

    @property
    def ids(self) -> list[str]:
        return sorted(event.id for event in self.events)


@pytest.mark.parametrize("sign", SENDERS)
async def test_a_sender_library_s_deliveries_are_stored_once_and_handled_by_type(
    store_place: Place, sign: Sign
) -> None:
    receiver = EventReceiver(
        inbox=store_place.inbox(), verifier=StandardWebhooksVerifier(SECRET), poll_interval=0.05
    )
    paid, every = Seen(), Seen()
    receiver.on("invoice.paid")(paid)
    receiver.on_any()(every)
    paid_body = envelope("invoice.paid", invoice="in_1", amount=4200, note="reçu ✓")
    sent_at = int(time.time())
    async with serve(receiver, prefix="/billing/") as client:
        response = await client.post(
            "/billing/", data=paid_body, headers=signed(sign, "msg_1", paid_body, timestamp=sent_at)
        )
        assert response.status == 200
        assert await response.json() == {"status": "accepted"}
        other = envelope("customer.created", customer="cus_1")
        response = await client.post("/billing/", data=other, headers=signed(sign, "msg_2", other))
        assert await response.json() == {"status": "accepted"}
        # The sender's retry of msg_1, signed again later: a duplicate, stored once.
        response = await client.post(
            "/billing/", data=paid_body, headers=signed(sign, "msg_1", paid_body)
        )
        assert response.status == 200
        assert await response.json() == {"status": "duplicate"}

        refused = {
            "tampered": (paid_body.replace(b"4200", b"9900"), signed(sign, "msg_3", paid_body)),
            "stale": (
                paid_body,
                signed(sign, "msg_4", paid_body, timestamp=int(time.time()) - 600),
            ),
            "unknown secret": (
                paid_body,
                signed(sign, "msg_5", paid_body, secret=OTHER_SECRET),
            ),
        }
        for what, (body, headers) in refused.items():
            response = await client.post("/billing/", data=body, headers=headers)
            assert response.status == 401, what
        await idle(receiver)

    assert paid.ids == ["msg_1"]
    assert every.ids == ["msg_1", "msg_2"]
    [event] = paid.events
    assert event.type == "invoice.paid"
    assert event.timestamp == sent_at
    assert event.data == {"invoice": "in_1", "amount": 4200, "note": "reçu ✓"}
    assert event.raw == paid_body
    assert event.dedup_key == ("webhook", "msg_1")
    assert receiver.metrics.accepted == 2
    assert receiver.metrics.duplicate == 1
    assert receiver.metrics.processed == 2
    assert sum(receiver.metrics.rejected.values()) == 3


async def test_a_failing_handler_is_retried_then_dead_lettered_and_replayed(
    store_place: Place,
) -> None:
    receiver = EventReceiver(
        inbox=store_place.inbox(),
        verifier=StandardWebhooksVerifier(SECRET),
        poll_interval=0.05,
        retry_base=0.01,
        max_attempts=2,
    )
    attempts: list[int] = []
    healthy = asyncio.Event()

    @receiver.on("invoice.paid")
    async def flaky(event: WebhookEvent, info: Any) -> None:
        attempts.append(info.attempt)
        if not healthy.is_set():
            raise RuntimeError("the ledger is down")

    body = envelope("invoice.paid", invoice="in_9")
    async with serve(receiver) as client:
        response = await client.post(
            "/hooks/", data=body, headers=signed(sign_with_standardwebhooks, "msg_9", body)
        )
        assert await response.json() == {"status": "accepted"}
        [dead] = await eventually(receiver.dead_letters, "the entry to be dead-lettered")
        assert isinstance(dead.event, WebhookEvent)
        assert (dead.event.id, dead.event.type) == ("msg_9", "invoice.paid")
        assert dead.event.data == {"invoice": "in_9"}
        assert "the ledger is down" in (dead.last_error or "")
        healthy.set()
        await receiver.replay(dead.id)
        await idle(receiver)
        assert await receiver.dead_letters() == []
    assert attempts == [1, 2, 1]
    assert receiver.metrics.dead_lettered == 1


@pytest.mark.parametrize(
    ("headers", "body", "reason"),
    [
        ({}, envelope("a.b"), "missing header webhook-id or svix-id"),
        ({"webhook-id": "m" * 201}, envelope("a.b"), "201 characters long, over the 200"),
        ({"webhook-id": "m"}, b'{"data": {}}', "the body's 'type' is missing"),
        ({"webhook-id": "m"}, b'{"type": 7}', "the body's 'type' is a number"),
        ({"webhook-id": "m"}, b"[1, 2]", "the body's 'type' is missing"),
        ({"webhook-id": "m", "webhook-timestamp": "soon"}, envelope("a.b"), "Unix seconds"),
        ({"webhook-id": "m"}, b'{"type": "a.b"', "not valid JSON"),
        ({"webhook-id": "m"}, envelope("a\tb"), "the event type holds the unprintable character"),
    ],
    ids=[
        "no id",
        "long id",
        "no type",
        "numeric type",
        "array",
        "bad timestamp",
        "bad json",
        "unprintable type",
    ],
)
async def test_a_delivery_without_what_an_event_needs_is_refused_with_the_fix(
    headers: dict[str, str], body: bytes, reason: str
) -> None:
    """A verifier that accepts anything lets the kind's own checks speak."""

    class AcceptAll:
        path_tokens = ()

        def verify(self, delivery: Any) -> None:
            return None

    receiver = EventReceiver(inbox=MemoryInbox(), verifier=AcceptAll())
    async with serve(receiver) as client:
        response = await client.post("/hooks/", data=body, headers={**JSON, **headers})
        assert response.status == 400
        assert reason in (await response.json())["error"]
        assert await receiver.inbox.pending_count() == 0


async def test_the_service_s_receiver_and_another_sender_s_mount_side_by_side(
    tmp_path: Path,
) -> None:
    service = WebhookReceiver(
        inbox=SQLiteInbox(tmp_path / "service.sqlite3"),
        verifier=TokenVerifier(TOKEN),
        poll_interval=0.05,
    )
    billing = EventReceiver(
        inbox=SQLiteInbox(tmp_path / "billing.sqlite3"),
        verifier=StandardWebhooksVerifier(SECRET),
        poll_interval=0.05,
    )
    completed: list[ProcessCompleted] = []
    paid = Seen()
    service.on_completed()(_append_to(completed))
    billing.on("invoice.paid")(paid)
    app = web.Application()
    service.setup(app, prefix="/hooks/")
    billing.setup(app, prefix="/billing/")
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        response = await client.post(f"/hooks/{TOKEN}", data=encode(payload("p-1")), headers=JSON)
        assert await response.json() == {"status": "accepted"}
        body = envelope("invoice.paid", invoice="in_2")
        response = await client.post(
            "/billing/", data=body, headers=signed(sign_with_svix, "msg_7", body)
        )
        assert await response.json() == {"status": "accepted"}
        # Each receiver refuses the other's deliveries: a token is no signature, and back.
        response = await client.post(f"/billing/{TOKEN}", data=encode(payload("p-2")), headers=JSON)
        assert response.status == 401
        response = await client.post(
            "/hooks/", data=body, headers=signed(sign_with_svix, "msg_8", body)
        )
        assert response.status == 401
        await idle(service)
        await idle(billing)
    assert [event.process_id for event in completed] == ["p-1"]
    assert paid.ids == ["msg_7"]


def _append_to(events: list[ProcessCompleted]) -> Callable[[ProcessCompleted], Any]:
    async def handler(event: ProcessCompleted) -> None:
        events.append(event)

    return handler


async def test_a_generic_receiver_takes_no_option_of_the_service_s_events() -> None:
    with pytest.raises(ConfigurationError, match="give it to WebhookReceiver"):
        EventReceiver(
            inbox=MemoryInbox(),
            verifier=StandardWebhooksVerifier(SECRET),
            registry=object(),
        )
    receiver = EventReceiver(inbox=MemoryInbox(), verifier=StandardWebhooksVerifier(SECRET))
    with pytest.raises(ConfigurationError, match="event type"):
        receiver.on()
    with pytest.raises(ConfigurationError, match="use RedisInbox"):
        receiver.on_any(atomic=True)(_append_to([]))


# -- a receiver process killed and started again ------------------------------------------------


@asynccontextmanager
async def event_receiver_process(
    tmp_path: Path, place: Place, name: str, mode: str
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    args = (*place.argv(), name, str(tmp_path / "record.txt"), mode)
    async with node_running(SCRIPT, *args, name=name) as (proc, port):
        yield proc, f"http://127.0.0.1:{port}/events/"


@pytest.mark.slow
async def test_each_message_is_handled_once_across_a_sigkill_and_a_restart(
    tmp_path: Path, durable_place: Place
) -> None:
    bodies = {"msg_a": envelope("invoice.paid", n=1), "msg_b": envelope("invoice.voided", n=2)}

    async def deliver(url: str, msg_id: str) -> str:
        body = bodies[msg_id]
        headers = signed(sign_with_svix, msg_id, body)
        async with session.post(url, data=body, headers=headers) as response:
            assert response.status == 200
            return str((await response.json())["status"])

    async with aiohttp.ClientSession() as session:
        async with event_receiver_process(tmp_path, durable_place, "first", "block") as (
            proc,
            url,
        ):
            assert [await deliver(url, m) for m in bodies] == ["accepted", "accepted"]
            proc.send_signal(signal.SIGKILL)
            assert await proc.wait() == -signal.SIGKILL
        assert recorded(tmp_path) == []

        async with event_receiver_process(tmp_path, durable_place, "second", "record") as (
            proc,
            url,
        ):
            expected = ["msg_a invoice.paid", "msg_b invoice.voided"]

            async def both_recorded() -> bool:
                return recorded(tmp_path) == expected

            await eventually(both_recorded, "the restarted receiver to handle both", limit=30)
            # The dedup keys survived the crash: the sender's retries are duplicates.
            assert [await deliver(url, m) for m in bodies] == ["duplicate", "duplicate"]
            proc.send_signal(signal.SIGTERM)
            await proc.wait()
    assert recorded(tmp_path) == ["msg_a invoice.paid", "msg_b invoice.voided"]


@pytest.fixture(
    params=[
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
def atomic_store(request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    """A store whose inbox applies handlers' writes with the ack (each writes its own way: see
    :func:`effects_of`), with a fresh place."""
    return place_for(store_named(request.param), request, tmp_path)


@asynccontextmanager
async def effects_of(store: Place) -> AsyncIterator[Callable[[], Any]]:
    """A reader of the effects the handlers' writes had, by message id, in the store itself
    (for PostgreSQL, in the ``effects`` table it creates)."""
    location, namespace = store.place, store.namespace
    if store.store.name == "redis":
        import redis.asyncio

        client = redis.asyncio.Redis.from_url(location)

        async def redis_effects() -> dict[str, int]:
            found = await client.hgetall(f"{namespace}test:effects")
            return {key.decode(): int(value) for key, value in found.items()}

        try:
            yield redis_effects
        finally:
            await client.aclose()
        return
    import asyncpg

    conn = await asyncpg.connect(location)
    await conn.execute(
        f'CREATE SCHEMA "{namespace}";'
        f' CREATE TABLE "{namespace}".effects (message_id text PRIMARY KEY, n int NOT NULL)'
    )

    async def postgres_effects() -> dict[str, int]:
        rows = await conn.fetch(f'SELECT message_id, n FROM "{namespace}".effects')
        return {row["message_id"]: row["n"] for row in rows}

    try:
        yield postgres_effects
    finally:
        await conn.close()


@pytest.mark.slow
async def test_a_process_killed_between_an_atomic_handler_and_its_ack_leaves_one_effect(
    tmp_path: Path, atomic_store: Place
) -> None:
    """SIGKILL after the handler queued its writes: the restarted receiver runs it again and
    applies its writes; the killed run applied none.  The effect happens once per message id."""
    body = envelope("invoice.paid", invoice="in_k")
    async with effects_of(atomic_store) as effects, aiohttp.ClientSession() as session:
        async with event_receiver_process(tmp_path, atomic_store, "doomed", "atomic-die") as (
            proc,
            url,
        ):
            headers = signed(sign_with_standardwebhooks, "msg_k", body)
            async with session.post(url, data=body, headers=headers) as response:
                assert await response.json() == {"status": "accepted"}  # stored before the answer
            async with asyncio.timeout(30):  # a guard against a hang only
                assert await proc.wait() == -signal.SIGKILL  # the handler killed its process
        assert recorded(tmp_path) == ["run msg_k"]
        assert await effects() == {}

        async with event_receiver_process(tmp_path, atomic_store, "heir", "atomic") as (
            proc,
            url,
        ):
            await eventually(effects, "the restarted receiver to apply the writes", limit=30)
            headers = signed(sign_with_standardwebhooks, "msg_k", body)
            async with session.post(url, data=body, headers=headers) as response:
                assert await response.json() == {"status": "duplicate"}
            proc.send_signal(signal.SIGTERM)
            await proc.wait()
        assert recorded(tmp_path) == ["run msg_k", "run msg_k"]
        assert await effects() == {"msg_k": 1}


async def test_metrics_and_spans_name_the_message_and_its_type() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    receiver = EventReceiver(
        inbox=MemoryInbox(),
        verifier=StandardWebhooksVerifier(SECRET),
        telemetry=ReceiverTelemetry(metrics=True, tracing=provider),
    )
    receiver.on("invoice.paid")(Seen())
    body = envelope("invoice.paid", invoice="in_3")
    async with serve(receiver) as client:
        headers = signed(sign_with_svix, "msg_3", body)
        assert (await client.post("/hooks/", data=body, headers=headers)).status == 200
        await idle(receiver)
    spans = {span.name: dict(span.attributes or {}) for span in exporter.get_finished_spans()}
    for name in ("webhooks.delivery", "webhooks.dispatch", "webhooks.handler"):
        assert spans[name]["webhooks.event_id"] == "webhook:msg_3", name
        assert spans[name]["webhooks.event_type"] == "invoice.paid", name
    registry = receiver.telemetry.registry
    assert registry is not None
    assert (
        registry.get_sample_value(
            "webhooks_deliveries_total", {"outcome": "accepted", "reason": ""}
        )
        == 1
    )


async def test_an_event_of_the_other_kind_in_a_shared_inbox_ends_as_a_dead_letter() -> None:
    """One inbox for both receivers is a mistake the docs warn about: the entry the service's
    handlers cannot take is retried, then parked, not lost, and nothing else stops."""
    inbox = MemoryInbox()
    service = WebhookReceiver(
        inbox=inbox,
        verifier=TokenVerifier(TOKEN),
        max_attempts=2,
        retry_base=0.01,
        poll_interval=0.05,
    )
    completed: list[ProcessCompleted] = []
    service.on_completed(status="done")(_append_to(completed))
    body = envelope("invoice.paid", invoice="in_4")
    stray = WebhookEvent(id="msg_4", type="invoice.paid", timestamp=None, data={}, raw=body)
    assert await inbox.put(stray, body)
    async with serve(service) as client:
        [dead] = await eventually(service.dead_letters, "the stray entry to be dead-lettered")
        assert dead.event == stray
        assert "no handler can take this event" in (dead.last_error or "")
        response = await client.post(f"/hooks/{TOKEN}", data=encode(payload("p-5")), headers=JSON)
        assert await response.json() == {"status": "accepted"}
        await idle(service)
    assert [event.process_id for event in completed] == ["p-5"]


async def test_the_guide_s_side_by_side_example_receives_both(tmp_path: Path) -> None:
    example = run_block(ROOT / "docs" / "other-providers.md", "side-by-side")
    app = web.Application()
    example["add_receivers"](app, TOKEN, SECRET, str(tmp_path))
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        response = await client.post(f"/hooks/{TOKEN}", data=encode(payload("p-1")), headers=JSON)
        assert await response.json() == {"status": "accepted"}
        body = envelope("invoice.paid", invoice="in_6", amount=1200)
        for _ in range(2):  # the sender's retry is a duplicate
            await client.post("/billing/", data=body, headers=signed(sign_with_svix, "msg_6", body))
        ledger = app[example["LEDGER"]]
        await wait_until(lambda: bool(ledger), "the invoice to reach the ledger")
    assert ledger == {"webhook:msg_6": 1200}
    assert (tmp_path / "service.sqlite3").exists()
    assert (tmp_path / "billing.sqlite3").exists()


async def test_a_path_token_of_a_generic_receiver_stays_out_of_the_access_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A sender that can only put a secret in the URL: TokenVerifier, and RedactingAccessLogger
    hides the token of this receiver as it does the service's."""
    receiver = EventReceiver(inbox=MemoryInbox(), verifier=TokenVerifier(TOKEN), poll_interval=0.05)
    receiver.on_any()(Seen())
    app = web.Application()
    receiver.setup(app, prefix="/mail/")
    runner = web.AppRunner(
        app,
        access_log_class=RedactingAccessLogger,
        access_log=logging.getLogger("aiohttp.access"),
        access_log_format='"%r" %s',
    )
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    caplog.set_level(logging.INFO, logger="aiohttp.access")
    body = envelope("email.bounced", to="a@example.com")
    try:
        async with aiohttp.ClientSession() as session:
            url = f"http://127.0.0.1:{runner.addresses[0][1]}/mail/{TOKEN}"
            headers = {**JSON, "webhook-id": "msg_m"}
            async with session.post(url, data=body, headers=headers) as response:
                assert await response.json() == {"status": "accepted"}
    finally:
        await runner.cleanup()
    (line,) = [r.getMessage() for r in caplog.records if r.name == "aiohttp.access"]
    assert TOKEN not in line
    assert '"POST /mail/*** HTTP/1.1" 200' in line
