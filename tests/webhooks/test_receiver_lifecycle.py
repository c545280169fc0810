"""What a handler learns of its attempt, the drain at shutdown, and one-call setup per backend."""

from __future__ import annotations

import asyncio

import pytest
from whtools import HOOK, JSON, TOKEN, encode, payload, serve, wait_until

from asyncsdk import ConfigurationError, ProcessCompleted
from webhooks import (
    DeliveryInfo,
    MemoryInbox,
    RegistryClosedError,
    TokenVerifier,
    WebhookReceiver,
)


def make(**options: object) -> WebhookReceiver:
    return WebhookReceiver(
        inbox=MemoryInbox(),
        verifier=TokenVerifier(TOKEN),
        poll_interval=0.05,
        **options,  # type: ignore[arg-type]
    )


async def test_a_handler_that_asks_gets_its_attempt_number_and_others_only_the_event() -> None:
    receiver = make(retry_base=0.01, retry_cap=0.02)
    attempts: list[tuple[int, str | None]] = []
    plain: list[str] = []

    @receiver.on_completed()
    async def flaky(event: ProcessCompleted, info: DeliveryInfo) -> None:
        attempts.append((info.attempt, info.last_error))
        if info.attempt < 3:
            raise RuntimeError(f"try {info.attempt}")

    @receiver.on_completed()
    async def one_argument(event: ProcessCompleted) -> None:
        plain.append(event.process_id)

    async with serve(receiver) as client:
        response = await client.post(HOOK, data=encode(payload("p-1")), headers=JSON)
        assert response.status == 200
        await wait_until(lambda: receiver.metrics.processed == 1, "the third attempt to succeed")
    assert [n for n, _ in attempts] == [1, 2, 3]
    assert attempts[0][1] is None
    assert "try 2" in (attempts[2][1] or "")
    assert plain == ["p-1"]  # succeeded on the first attempt, not run again


async def test_a_replayed_event_starts_again_at_attempt_one() -> None:
    receiver = make(max_attempts=1)
    attempts: list[int] = []
    fail = True

    @receiver.on_completed()
    async def handler(event: ProcessCompleted, info: DeliveryInfo) -> None:
        attempts.append(info.attempt)
        if fail:
            raise RuntimeError("down")

    async with serve(receiver) as client:
        await client.post(HOOK, data=encode(payload("p-1")), headers=JSON)
        await wait_until(lambda: receiver.metrics.dead_lettered == 1, "the dead letter")
        fail = False
        (dead,) = await receiver.dead_letters()
        await receiver.replay(dead.id)
        await wait_until(lambda: receiver.metrics.processed == 1, "the replay to be handled")
    assert attempts == [1, 1]


def test_a_handler_with_too_many_parameters_is_refused_at_registration() -> None:
    receiver = make()

    async def three(event: ProcessCompleted, info: DeliveryInfo, extra: int) -> None: ...

    with pytest.raises(ConfigurationError, match=r"takes \(event\) or \(event, info\)"):
        receiver.on_completed()(three)


async def test_stopping_refuses_new_deliveries_finishes_the_running_one_and_says_drained() -> None:
    receiver = make(drain_timeout=10.0)
    started = asyncio.Event()
    release = asyncio.Event()
    finished: list[str] = []

    @receiver.on_completed()
    async def slow(event: ProcessCompleted) -> None:
        started.set()
        await release.wait()
        finished.append(event.process_id)

    async with serve(receiver) as client:
        await client.post(HOOK, data=encode(payload("p-1")), headers=JSON)
        await started.wait()
        stopping = asyncio.create_task(receiver.stop())
        drained = asyncio.create_task(receiver.drained())
        await wait_until(lambda: not receiver.running, "the drain to begin")
        refused = await client.post(HOOK, data=encode(payload("p-2")), headers=JSON)
        assert refused.status == 503
        assert refused.headers["Retry-After"] == "5"
        await asyncio.sleep(0.05)
        assert not drained.done()  # the running handler is not finished yet
        release.set()
        async with asyncio.timeout(10):  # a guard against a hang, not a speed requirement
            await drained
        await stopping
    assert finished == ["p-1"]
    assert receiver.metrics.processed == 1


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
