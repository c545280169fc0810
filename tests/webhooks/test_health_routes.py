"""The probes' routes: ready while running with a store that answers, not ready while draining or
while the store is frozen or gone; alive all along.  For both receivers.

The store tests run a Redis or PostgreSQL server of their own (``own_servers.py``), which they
freeze with SIGSTOP, as a host that stalls would, and then kill.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import attrs
import pytest
import standardwebhooks
from aiohttp.test_utils import TestClient
from own_servers import OwnServer, own_postgres, own_redis
from whtools import HOOK, JSON, TOKEN, encode, eventually, payload, serve, wait_until

from webhooks import (
    EventReceiver,
    Inbox,
    MemoryInbox,
    PostgresInbox,
    RedisInbox,
    StandardWebhooksVerifier,
    TokenVerifier,
    WebhookReceiver,
)

SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
PUT_TIMEOUT = 1.0
"""Also how long the readiness route waits for the store's answer."""

AnyReceiver = WebhookReceiver | EventReceiver


@attrs.frozen
class Kind:
    """One receiver class, as these tests build it and deliver to it."""

    build: Callable[..., AnyReceiver]
    deliver: Callable[[TestClient[Any, Any], str], Awaitable[int]]
    hold: Callable[[AnyReceiver, asyncio.Event, asyncio.Event], None]
    """Register a handler that sets the first event when it starts, then waits for the second."""


def _build_service(inbox: Inbox, **options: Any) -> AnyReceiver:
    return WebhookReceiver(
        inbox=inbox, verifier=TokenVerifier(TOKEN), poll_interval=0.05, **options
    )


async def _deliver_service(client: TestClient[Any, Any], name: str) -> int:
    response = await client.post(HOOK, data=encode(payload(name)), headers=JSON)
    return response.status


def _hold_service(receiver: AnyReceiver, started: asyncio.Event, release: asyncio.Event) -> None:
    assert isinstance(receiver, WebhookReceiver)

    async def held(_event: object) -> None:
        started.set()
        await release.wait()

    receiver.add_handler(held)


def _build_generic(inbox: Inbox, **options: Any) -> AnyReceiver:
    return EventReceiver(
        inbox=inbox, verifier=StandardWebhooksVerifier(SECRET), poll_interval=0.05, **options
    )


async def _deliver_generic(client: TestClient[Any, Any], name: str) -> int:
    body = json.dumps({"type": "invoice.paid", "data": {"n": name}}).encode()
    now = datetime.datetime.now(datetime.UTC)
    headers = {
        **JSON,
        "webhook-id": name,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": standardwebhooks.Webhook(SECRET).sign(name, now, body.decode()),
    }
    response = await client.post("/hooks/", data=body, headers=headers)
    return response.status


def _hold_generic(receiver: AnyReceiver, started: asyncio.Event, release: asyncio.Event) -> None:
    assert isinstance(receiver, EventReceiver)

    async def held(_event: object) -> None:
        started.set()
        await release.wait()

    receiver.add_handler(held)


KINDS = [
    pytest.param(Kind(_build_service, _deliver_service, _hold_service), id="WebhookReceiver"),
    pytest.param(Kind(_build_generic, _deliver_generic, _hold_generic), id="EventReceiver"),
]


async def probe(client: TestClient[Any, Any], route: str) -> tuple[int, str]:
    response = await client.get(f"/hooks/{route}")
    return response.status, (await response.json())["status"]


@pytest.mark.parametrize("kind", KINDS)
async def test_ready_while_running_not_ready_from_the_drain_on_alive_all_along(kind: Kind) -> None:
    receiver = kind.build(MemoryInbox(), health_routes=True, drain_timeout=10.0)
    started, release = asyncio.Event(), asyncio.Event()
    kind.hold(receiver, started, release)
    async with serve(receiver) as client:
        assert await probe(client, "ready") == (200, "ready")
        assert await probe(client, "live") == (200, "alive")
        assert await kind.deliver(client, "first") == 200
        async with asyncio.timeout(10):
            await started.wait()
        stopping = asyncio.create_task(receiver.stop())
        await wait_until(lambda: not receiver.running, "the drain to begin")
        # Draining: the handler still runs, and the host still serves.
        assert await probe(client, "ready") == (503, "stopping")
        assert await probe(client, "live") == (200, "alive")
        assert await kind.deliver(client, "second") == 503
        assert not stopping.done()
        release.set()
        async with asyncio.timeout(10):  # a guard against a hang, not a speed requirement
            await stopping
        assert await probe(client, "ready") == (503, "stopping")
        assert await probe(client, "live") == (200, "alive")


@pytest.mark.parametrize("kind", KINDS)
async def test_the_probes_routes_are_off_unless_asked_for(kind: Kind) -> None:
    async with serve(kind.build(MemoryInbox())) as client:
        for route in ("ready", "live"):
            # Not found, or only the delivery route's POST (a path token) allowed there.
            assert (await client.get(f"/hooks/{route}")).status in {404, 405}


@pytest.fixture
async def redis_server() -> AsyncIterator[OwnServer]:
    with own_redis() as server:
        yield server


@pytest.fixture
async def postgres_server() -> AsyncIterator[OwnServer]:
    with own_postgres() as server:
        yield server


async def not_ready_while_frozen_and_once_gone(kind: Kind, server: OwnServer, inbox: Inbox) -> None:
    receiver = kind.build(inbox, health_routes=True, put_timeout=PUT_TIMEOUT, drain_timeout=0.1)
    async with serve(receiver) as client:
        assert await probe(client, "ready") == (200, "ready")
        server.freeze()
        try:
            async with asyncio.timeout(PUT_TIMEOUT + 5):  # the route answers within put_timeout
                assert await probe(client, "ready") == (503, "store_unavailable")
            assert await probe(client, "live") == (200, "alive")
        finally:
            server.thaw()

        async def ready_again() -> bool:
            return await probe(client, "ready") == (200, "ready")

        await eventually(ready_again, "ready once the store answers again", limit=15, step=0.1)
        server.kill()
        async with asyncio.timeout(PUT_TIMEOUT + 5):
            assert await probe(client, "ready") == (503, "store_unavailable")
        assert await probe(client, "live") == (200, "alive")


@pytest.mark.parametrize("kind", KINDS)
async def test_not_ready_while_redis_is_frozen_or_gone(kind: Kind, redis_server: OwnServer) -> None:
    inbox = RedisInbox(redis_server.url, prefix=f"health:{uuid.uuid4().hex[:8]}:")
    await not_ready_while_frozen_and_once_gone(kind, redis_server, inbox)


@pytest.mark.parametrize("kind", KINDS)
async def test_not_ready_while_postgres_is_frozen_or_gone(
    kind: Kind, postgres_server: OwnServer
) -> None:
    inbox = PostgresInbox(postgres_server.url, schema="health")
    await not_ready_while_frozen_and_once_gone(kind, postgres_server, inbox)
