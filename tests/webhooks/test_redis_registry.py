"""RedisRegistry: waiters in one process woken by resolve() in another, through a real Redis."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import AsyncIterator

import attrs
import pytest
import redis.asyncio
from registry_contract import MakeRegistry, RegistryContract, registries
from whtools import event

from webhooks import RedisRegistry, RegistryUnavailableError

pytestmark = pytest.mark.redis


class TestRedisRegistry(RegistryContract):
    """The shared registry's contract, on Redis (with the module's make_registry)."""


@pytest.fixture
async def make_registry(redis_url: str, redis_prefix: str) -> AsyncIterator[MakeRegistry]:
    """Registries on the test's prefix (each one stands for another process)."""
    async with registries(functools.partial(RedisRegistry, redis_url, prefix=redis_prefix)) as make:
        yield make


async def numsub(raw_redis: redis.asyncio.Redis, channel: str) -> int:
    ((_, count),) = await raw_redis.pubsub_numsub(channel)
    return int(count)


async def test_each_instance_holds_one_pubsub_subscription(
    make_registry: MakeRegistry, redis_prefix: str, raw_redis: redis.asyncio.Redis
) -> None:
    channel = f"{redis_prefix}results"
    a, b = await make_registry(), await make_registry()
    tasks = [asyncio.create_task(a.wait(f"p-{n}", timeout=10)) for n in range(500)]
    tasks += [asyncio.create_task(b.wait(f"p-{n}", timeout=10)) for n in range(500)]
    await asyncio.sleep(0.05)
    assert await numsub(raw_redis, channel) == 2
    assert a.subscriptions == b.subscriptions == 1
    await asyncio.gather(*(a.resolve(event(f"p-{n}")) for n in range(500)))
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
        stored_form = json.dumps(attrs.asdict(event("p-1")), separators=(",", ":"))
        async with raw_redis.pipeline(transaction=True) as tx:
            tx.client_kill_filter(_id=conn["id"])
            tx.set(f"{redis_prefix}result:p-1", stored_form, px=60_000, nx=True)
            tx.publish(f"{redis_prefix}results", stored_form)
            killed, stored, heard_by = await tx.execute()
        assert (killed, stored, heard_by) == (1, True, 0)
        assert await waiter == event("p-1")
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
    await registry.resolve(event("p-1"))
    keys = [k async for k in raw_redis.scan_iter(match=f"{redis_prefix}*")]
    assert keys == [f"{redis_prefix}result:p-1".encode()]
    assert 110_000 < await raw_redis.pttl(keys[0]) <= 120_000


async def test_unreachable_redis_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    registry = RedisRegistry("redis://127.0.0.1:1/0")
    with pytest.raises(RegistryUnavailableError, match="cannot be reached"):
        await registry.resolve(event())
    with pytest.raises(RegistryUnavailableError, match="is the server running"):
        await registry.start(timeout=0.3)
    assert registry.closed
    # Never subscribed, so nothing was lost: the log says it cannot listen yet.
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("webhooks")]
    assert warnings
    assert all("cannot listen on" in w and "on Redis yet" in w for w in warnings), warnings
