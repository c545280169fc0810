"""One-call setup per backend: a receiver and its stores on one store, closed with it; for the
service's events (the inbox and the registry) and for any sender's (the inbox)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable

import pytest
import redis.asyncio
from test_other_senders import SECRET, envelope, sign_with_standardwebhooks, signed
from whtools import HOOK, JSON, TOKEN, encode, idle, payload, serve

from asyncsdk import ProcessCompleted
from webhooks import (
    DeliveryInfo,
    EventReceiver,
    InboxUnavailableError,
    RedisBackend,
    RedisWrites,
    RegistryClosedError,
    StandardWebhooksVerifier,
    TokenVerifier,
    WebhookEvent,
    WebhookReceiver,
)


@pytest.fixture(
    params=[
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
def one_call(request: pytest.FixtureRequest) -> Callable[..., WebhookReceiver]:
    """``WebhookReceiver.from_redis`` or ``from_postgres`` on the test's own prefix or schema."""
    if request.param == "redis":
        url, prefix = (request.getfixturevalue(name) for name in ("redis_url", "redis_prefix"))
        return functools.partial(WebhookReceiver.from_redis, url, prefix=prefix)
    dsn, schema = (request.getfixturevalue(name) for name in ("postgres_dsn", "postgres_schema"))
    return functools.partial(WebhookReceiver.from_postgres, dsn, schema=schema)


async def test_one_call_sets_up_a_node_and_closes_what_it_made(
    one_call: Callable[..., WebhookReceiver],
) -> None:
    handled: list[tuple[str, int]] = []

    async def handler(event: ProcessCompleted, info: DeliveryInfo) -> None:
        handled.append((event.process_id, info.attempt))

    receiver = one_call(verifier=TokenVerifier(TOKEN), handler=handler, poll_interval=0.05)
    registry = receiver.registry
    assert registry is not None
    async with serve(receiver) as client:
        response = await client.post(HOOK, data=encode(payload("p-1")), headers=JSON)
        assert await response.json() == {"status": "accepted"}
        event = await registry.wait("p-1", timeout=10)  # type: ignore[attr-defined]
        assert event.process_id == "p-1"
    async with asyncio.timeout(10):
        await receiver.drained()
    assert handled == [("p-1", 1)]
    # The registry it made was closed with it.
    with pytest.raises(RegistryClosedError):
        await registry.wait("p-2", timeout=1)  # type: ignore[attr-defined]


@pytest.fixture(
    params=[
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
def events_one_call(request: pytest.FixtureRequest) -> Callable[..., EventReceiver]:
    """``EventReceiver.from_redis`` or ``from_postgres`` on the test's own prefix or schema."""
    if request.param == "redis":
        url, prefix = (request.getfixturevalue(name) for name in ("redis_url", "redis_prefix"))
        return functools.partial(EventReceiver.from_redis, url, prefix=prefix)
    dsn, schema = (request.getfixturevalue(name) for name in ("postgres_dsn", "postgres_schema"))
    return functools.partial(EventReceiver.from_postgres, dsn, schema=schema)


async def test_an_event_receiver_sets_up_a_node_in_one_call_too(
    events_one_call: Callable[..., EventReceiver],
) -> None:
    handled: list[tuple[str, str, int]] = []

    async def handler(event: WebhookEvent, info: DeliveryInfo) -> None:
        handled.append((event.id, event.type, info.attempt))

    receiver = events_one_call(
        verifier=StandardWebhooksVerifier(SECRET), handler=handler, poll_interval=0.05
    )
    body = envelope("invoice.paid", amount=12)
    headers = signed(sign_with_standardwebhooks, "msg_1", body)
    async with serve(receiver, prefix="/billing/") as client:  # type: ignore[arg-type]
        first = await client.post("/billing/", data=body, headers=headers)
        again = await client.post("/billing/", data=body, headers=headers)
        assert [await first.json(), await again.json()] == [
            {"status": "accepted"},
            {"status": "duplicate"},
        ]
        await idle(receiver)  # type: ignore[arg-type]
    async with asyncio.timeout(10):
        await receiver.drained()
    assert handled == [("msg_1", "invoice.paid", 1)]
    # The inbox it made was closed with it.
    with pytest.raises(InboxUnavailableError):
        await receiver.inbox.pending_count()


async def test_an_event_receiver_on_a_backend_runs_atomic_handlers(
    redis_url: str, redis_prefix: str, raw_redis: redis.asyncio.Redis
) -> None:
    receiver = EventReceiver.from_backend(
        RedisBackend(redis_url, prefix=redis_prefix),
        verifier=StandardWebhooksVerifier(SECRET),
        poll_interval=0.05,
    )

    @receiver.on("invoice.paid", atomic=True)
    async def paid(event: WebhookEvent, writes: RedisWrites) -> None:
        writes.call(
            "HSET", f"{redis_prefix}ledger", ":".join(event.dedup_key), event.data["amount"]
        )

    body = envelope("invoice.paid", amount=12)
    async with serve(receiver, prefix="/billing/") as client:  # type: ignore[arg-type]
        response = await client.post(
            "/billing/", data=body, headers=signed(sign_with_standardwebhooks, "msg_2", body)
        )
        assert response.status == 200
        await idle(receiver)  # type: ignore[arg-type]
    assert await raw_redis.hgetall(f"{redis_prefix}ledger") == {b"webhook:msg_2": b"12"}


async def test_a_redis_backend_opens_one_pool_for_its_inbox_and_registry(
    redis_url: str, redis_prefix: str, raw_redis: redis.asyncio.Redis
) -> None:
    name = f"backend-{redis_prefix.split(':')[1]}"  # to find its connections in CLIENT LIST

    async def connections() -> int:
        return len([c for c in await raw_redis.client_list() if c["name"] == name])

    backend = RedisBackend(f"{redis_url}?client_name={name}", prefix=redis_prefix)
    assert backend.inbox.client is not None
    assert backend.inbox.client is backend.registry.client
    await backend.registry.start()
    await backend.inbox.check()
    assert await connections() == 2  # the registry's subscription, one for the rest
    await backend.close()
    assert await connections() == 0
