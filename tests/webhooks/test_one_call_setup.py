"""One-call setup per backend: the receiver and its registry on one store, closed with it."""

from __future__ import annotations

import asyncio

import pytest
from whtools import HOOK, JSON, TOKEN, encode, payload, serve

from asyncsdk import ProcessCompleted
from webhooks import DeliveryInfo, RegistryClosedError, TokenVerifier, WebhookReceiver


@pytest.mark.redis
async def test_from_redis_sets_up_a_node_and_closes_what_it_made(
    redis_url: str, redis_prefix: str
) -> None:
    handled: list[str] = []

    async def handler(event: ProcessCompleted) -> None:
        handled.append(event.process_id)

    receiver = WebhookReceiver.from_redis(
        redis_url,
        prefix=redis_prefix,
        verifier=TokenVerifier(TOKEN),
        handler=handler,
        poll_interval=0.05,
    )
    registry = receiver.registry
    assert registry is not None
    async with serve(receiver) as client:
        response = await client.post(HOOK, data=encode(payload("p-1")), headers=JSON)
        assert await response.json() == {"status": "accepted"}
        event = await registry.wait("p-1", timeout=10)  # type: ignore[attr-defined]
        assert event.process_id == "p-1"
    async with asyncio.timeout(10):
        await receiver.drained()
    assert handled == ["p-1"]
    with pytest.raises(RegistryClosedError):
        await registry.wait("p-2", timeout=1)  # type: ignore[attr-defined]


@pytest.mark.postgres
async def test_from_postgres_sets_up_a_node_and_closes_what_it_made(
    postgres_dsn: str, postgres_schema: str
) -> None:
    handled: list[int] = []

    async def handler(event: ProcessCompleted, info: DeliveryInfo) -> None:
        handled.append(info.attempt)

    receiver = WebhookReceiver.from_postgres(
        postgres_dsn,
        schema=postgres_schema,
        verifier=TokenVerifier(TOKEN),
        handler=handler,
        poll_interval=0.05,
    )
    registry = receiver.registry
    assert registry is not None
    async with serve(receiver) as client:
        response = await client.post(HOOK, data=encode(payload("p-1")), headers=JSON)
        assert await response.json() == {"status": "accepted"}
        event = await registry.wait("p-1", timeout=10)  # type: ignore[attr-defined]
        assert event.process_id == "p-1"
    async with asyncio.timeout(10):
        await receiver.drained()
    assert handled == [1]
    with pytest.raises(RegistryClosedError):
        await registry.wait("p-2", timeout=1)  # type: ignore[attr-defined]
