"""RedisRegistry: waiters in one process woken by resolve() in another, through a real Redis."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable

import attrs
import pytest
import redis.asyncio

from asyncsdk import ProcessCompleted, ResultAsset, ResultWaiter, WaitTimeoutError
from webhooks import RedisRegistry, RegistryClosedError, RegistrySink, RegistryUnavailableError

pytestmark = pytest.mark.redis

MakeRegistry = Callable[..., Awaitable[RedisRegistry]]


def completed(process_id: str = "p-1", status: str = "done", src: str = "u1") -> ProcessCompleted:
    return ProcessCompleted(
        event="process.completed",
        process_id=process_id,
        order_id="o-1",
        tool="tool-virtual-staging",
        status=status,
        final_assets=(ResultAsset(asset_id="a-1", src=src),) if status == "done" else (),
    )


@pytest.fixture
async def make_registry(redis_url: str, redis_prefix: str) -> AsyncIterator[MakeRegistry]:
    """Started registries on the test's prefix (each one stands for another process)."""
    made: list[RedisRegistry] = []

    async def make(**options: object) -> RedisRegistry:
        registry = RedisRegistry(redis_url, prefix=redis_prefix, **options)  # type: ignore[arg-type]
        made.append(registry)
        await registry.start()
        return registry

    yield make
    for registry in made:
        await registry.close()


async def numsub(raw_redis: redis.asyncio.Redis, channel: str) -> int:
    ((_, count),) = await raw_redis.pubsub_numsub(channel)
    return int(count)


async def test_redis_registry_is_a_result_waiter_and_a_registry_sink(
    make_registry: MakeRegistry,
) -> None:
    registry = await make_registry()
    assert isinstance(registry, ResultWaiter)
    assert isinstance(registry, RegistrySink)


async def test_a_waiter_on_one_instance_is_resolved_by_another(
    make_registry: MakeRegistry,
) -> None:
    a, b = await make_registry(), await make_registry()
    waiters = [asyncio.create_task(a.wait("p-1", timeout=10)) for _ in range(3)]
    other = asyncio.create_task(a.wait("p-2", timeout=10))
    await asyncio.sleep(0.05)
    await b.resolve(completed("p-1"))
    assert await asyncio.gather(*waiters) == [completed("p-1")] * 3
    assert not other.done()
    await b.resolve(completed("p-2", status="failed"))
    assert (await other).status == "failed"
    assert a.pending_count == 0


async def test_an_event_that_landed_before_the_wait_is_read_from_redis(
    make_registry: MakeRegistry,
) -> None:
    b = await make_registry()
    await b.resolve(completed("p-early"))
    a = await make_registry()  # started after the publish: only the key can tell it
    assert await a.wait("p-early", timeout=5) == completed("p-early")


async def test_a_wait_before_start_still_finds_the_result(
    redis_url: str, redis_prefix: str, make_registry: MakeRegistry
) -> None:
    b = await make_registry()
    await b.resolve(completed("p-1"))
    async with RedisRegistry(redis_url, prefix=redis_prefix) as fresh:
        assert await fresh.wait("p-1", timeout=5) == completed("p-1")
    lazy = RedisRegistry(redis_url, prefix=redis_prefix)
    try:
        assert not lazy.healthy  # nothing started it yet
        assert await lazy.wait("p-1", timeout=5) == completed("p-1")  # wait() starts it
    finally:
        await lazy.close()


async def test_many_waiters_early_and_late_events(make_registry: MakeRegistry) -> None:
    a, b = await make_registry(), await make_registry()
    ids = [f"p-{n}" for n in range(2000)]
    await asyncio.gather(*(b.resolve(completed(pid)) for pid in ids[:1000]))
    tasks = [asyncio.create_task(a.wait(pid, timeout=20)) for pid in ids]
    await asyncio.sleep(0.05)
    await asyncio.gather(*(b.resolve(completed(pid)) for pid in ids[1000:]))
    assert [e.process_id for e in await asyncio.gather(*tasks)] == ids


async def test_the_first_event_wins_across_instances(make_registry: MakeRegistry) -> None:
    a, b, c = await make_registry(), await make_registry(), await make_registry()
    await b.resolve(completed("p-1", src="first"))
    await c.resolve(completed("p-1", src="second"))
    await c.resolve(completed("p-1", status="failed"))
    assert (await a.wait("p-1", timeout=5)).final_assets[0].src == "first"
    assert (await c.wait("p-1", timeout=5)).final_assets[0].src == "first"


async def test_one_subscription_per_instance_however_many_wait(
    make_registry: MakeRegistry, redis_prefix: str, raw_redis: redis.asyncio.Redis
) -> None:
    channel = f"{redis_prefix}results"
    a, b = await make_registry(), await make_registry()
    tasks = [asyncio.create_task(a.wait(f"p-{n}", timeout=10)) for n in range(500)]
    tasks += [asyncio.create_task(b.wait(f"p-{n}", timeout=10)) for n in range(500)]
    await asyncio.sleep(0.05)
    assert await numsub(raw_redis, channel) == 2
    assert a.subscriptions == b.subscriptions == 1
    await asyncio.gather(*(a.resolve(completed(f"p-{n}")) for n in range(500)))
    assert len(await asyncio.gather(*tasks)) == 1000
    await a.close()
    await b.close()
    assert await numsub(raw_redis, channel) == 0


@pytest.mark.parametrize("own_client", [True, False], ids=["own-pool", "given-client"])
async def test_a_result_published_while_the_subscription_is_down_still_arrives(
    redis_url: str, redis_prefix: str, raw_redis: redis.asyncio.Redis, own_client: bool
) -> None:
    name = f"registry-{redis_prefix.split(':')[1]}"  # to find its connection in CLIENT LIST
    client = None
    if own_client:
        registry = RedisRegistry(f"{redis_url}?client_name={name}", prefix=redis_prefix)
    else:
        client = redis.asyncio.Redis.from_url(redis_url, client_name=name)
        registry = RedisRegistry(prefix=redis_prefix, client=client)
    try:
        await registry.start()
        waiter = asyncio.create_task(registry.wait("p-1", timeout=10))
        await asyncio.sleep(0.05)
        (conn,) = [c for c in await raw_redis.client_list(_type="pubsub") if c["name"] == name]
        # Atomically: drop the subscription, then store and publish the result.  The message
        # reaches nobody; only the re-read after subscribing again can find the result.
        # The stored form: the event as compact JSON, as the registry writes it.
        event = json.dumps(attrs.asdict(completed("p-1")), separators=(",", ":"))
        async with raw_redis.pipeline(transaction=True) as tx:
            tx.client_kill_filter(_id=conn["id"])
            tx.set(f"{redis_prefix}result:p-1", event, px=60_000, nx=True)
            tx.publish(f"{redis_prefix}results", event)
            killed, stored, heard_by = await tx.execute()
        assert (killed, stored, heard_by) == (1, True, 0)
        assert await waiter == completed("p-1")
        assert registry.subscriptions == 2
        assert registry.healthy
    finally:
        await registry.close()
        if client is not None:
            await client.aclose()


async def test_result_keys_are_under_the_prefix_and_expire(
    make_registry: MakeRegistry, redis_prefix: str, raw_redis: redis.asyncio.Redis
) -> None:
    registry = await make_registry(keep_for=120)
    await registry.resolve(completed("p-1"))
    keys = [k async for k in raw_redis.scan_iter(match=f"{redis_prefix}*")]
    assert keys == [f"{redis_prefix}result:p-1".encode()]
    assert 110_000 < await raw_redis.pttl(keys[0]) <= 120_000


async def test_timeouts_and_cancellation_leave_no_local_waiters(
    make_registry: MakeRegistry,
) -> None:
    registry = await make_registry()
    slow = asyncio.create_task(registry.wait("p-1", timeout=10))
    cancelled = asyncio.create_task(registry.wait("p-1", timeout=10))
    with pytest.raises(WaitTimeoutError):
        await registry.wait("p-1", timeout=0.05)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert registry.pending_count == 1
    await registry.resolve(completed("p-1"))
    assert (await slow).process_id == "p-1"
    assert registry.pending_count == 0


async def test_close_fails_pending_waiters_and_health_follows_state(
    make_registry: MakeRegistry,
) -> None:
    registry = await make_registry()
    assert registry.healthy
    registry.set_healthy(False)  # this process's receiver stopped
    assert not registry.healthy
    registry.set_healthy(True)
    assert registry.healthy
    waiter = asyncio.create_task(registry.wait("p-1"))
    await asyncio.sleep(0.01)
    await registry.close()
    with pytest.raises(RegistryClosedError):
        await waiter
    assert not registry.healthy
    with pytest.raises(RegistryClosedError):
        await registry.wait("p-1")
    with pytest.raises(RegistryClosedError):
        await registry.resolve(completed("p-1"))


async def test_unreachable_redis_is_reported() -> None:
    registry = RedisRegistry("redis://127.0.0.1:1/0")
    with pytest.raises(RegistryUnavailableError, match="cannot be reached"):
        await registry.resolve(completed())
    with pytest.raises(RegistryUnavailableError, match="is the server running"):
        await registry.start(timeout=0.3)
    assert registry.closed
