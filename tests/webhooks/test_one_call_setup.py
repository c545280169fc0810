"""One-call setup per backend: the receiver and its registry on one store, closed with it."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable

import pytest
from whtools import HOOK, JSON, TOKEN, encode, payload, serve

from asyncsdk import ProcessCompleted
from webhooks import DeliveryInfo, RegistryClosedError, TokenVerifier, WebhookReceiver


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
