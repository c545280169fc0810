"""``atomic=True`` handlers: their writes and the ack are one step, so they happen once per event.

The inbox applies a handler's queued Redis commands in the same script as the ack, and only while
the worker still holds the entry; a process that dies between its handler and its ack leaves no
effect behind, and the process that takes the entry over applies them once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
import redis.asyncio
from inbox_contract import CLAIM_TIMEOUT, claim_eventually, event
from test_redis_multi_instance import TOKEN, payload, start_node, stop_node
from whtools import HOOK, JSON, encode, idle, serve
from whtools import payload as hook_payload

from asyncsdk import ConfigurationError, ProcessCompleted
from webhooks import (
    DeliveryInfo,
    MemoryInbox,
    RedisInbox,
    RedisWrites,
    TokenVerifier,
    WebhookReceiver,
)
from webhooks.contract import AtomicInbox

pytestmark = pytest.mark.redis


@pytest.fixture
async def inbox(redis_url: str, redis_prefix: str) -> AsyncIterator[RedisInbox]:
    inbox = RedisInbox(redis_url, prefix=redis_prefix, claim_timeout=CLAIM_TIMEOUT)
    yield inbox
    await inbox.close()


def counting(key: str, field: str) -> RedisWrites:
    writes = RedisWrites()
    writes.call("HINCRBY", key, field, 1)
    return writes


async def test_redis_inbox_applies_writes_with_the_ack(
    inbox: RedisInbox, raw_redis: redis.asyncio.Redis, redis_prefix: str
) -> None:
    assert isinstance(inbox, AtomicInbox)
    key = f"{redis_prefix}effects"
    await inbox.put(event("p-1"), b"raw")
    [entry] = await inbox.claim_batch("c1", 10)
    first, second = counting(key, "p-1"), RedisWrites()
    second.call("SET", f"{redis_prefix}last", b"p-1")
    assert await inbox.ack_with(entry.id, "c1", [first, second]) is True
    assert await raw_redis.hget(key, "p-1") == b"1"
    assert await raw_redis.get(f"{redis_prefix}last") == b"p-1"
    assert await inbox.pending_count() == 0
    # Finished: a second commit of the same entry changes nothing, and the dedup key stays.
    assert await inbox.ack_with(entry.id, "c1", [counting(key, "p-1")]) is False
    assert await raw_redis.hget(key, "p-1") == b"1"
    assert await inbox.put(event("p-1"), b"again") is False


async def test_a_consumer_that_lost_its_claim_writes_nothing(
    inbox: RedisInbox, raw_redis: redis.asyncio.Redis, redis_prefix: str
) -> None:
    key = f"{redis_prefix}effects"
    await inbox.put(event("p-1"), b"raw")
    [stale] = await inbox.claim_batch("slow", 10)
    # "slow" never renews its claim: after claim_timeout another consumer takes the entry over.
    [taken] = await claim_eventually(inbox, "fresh")
    assert taken.id == stale.id
    assert await inbox.ack_with(stale.id, "slow", [counting(key, "p-1")]) is False
    assert await raw_redis.hget(key, "p-1") is None
    assert await inbox.ack_with(taken.id, "fresh", [counting(key, "p-1")]) is True
    assert await raw_redis.hget(key, "p-1") == b"1"


async def test_an_entry_with_no_writes_is_acked_like_ack(inbox: RedisInbox) -> None:
    await inbox.put(event("p-1"), b"raw")
    [entry] = await inbox.claim_batch("c1", 10)
    assert await inbox.ack_with(entry.id, "c1", []) is True
    assert await inbox.pending_count() == 0
    assert await inbox.claim_batch("c1", 10) == []
    assert await inbox.ack_with("not-an-id", "c1", []) is False


async def test_writes_take_plain_values_only(inbox: RedisInbox) -> None:
    writes = inbox.new_writes()
    for bad in (None, True, ["list"], {"a": 1}):
        with pytest.raises(ConfigurationError, match="str, bytes, int or float"):
            writes.call("SET", "k", bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="command name"):
        writes.call("")
    assert len(writes) == 0
    with pytest.raises(ConfigurationError, match="RedisWrites"):
        await inbox.ack_with("1-0", "c1", [["SET", "k", "v"]])  # type: ignore[list-item]


async def test_atomic_handlers_need_an_inbox_that_can_apply_them() -> None:
    receiver = WebhookReceiver(inbox=MemoryInbox(), verifier=TokenVerifier(TOKEN))

    async def handler(event: ProcessCompleted, writes: RedisWrites) -> None:
        writes.call("INCR", "k")

    with pytest.raises(ConfigurationError, match="use RedisInbox") as refused:
        receiver.on_completed(atomic=True)(handler)
    assert receiver.handlers == []
    # The key to make writes idempotent on, as the guides name it: the one the inbox claims.
    assert "key them on event.dedup_key, the key the inbox deduplicates on" in str(refused.value)


async def test_writes_of_a_retried_entry_are_applied_once(
    redis_url: str, redis_prefix: str, raw_redis: redis.asyncio.Redis
) -> None:
    """A plain handler fails once: the atomic one runs twice, its writes land once."""
    receiver = WebhookReceiver(
        inbox=RedisInbox(redis_url, prefix=redis_prefix),
        verifier=TokenVerifier(HOOK.rsplit("/", 1)[1]),
        retry_base=0.01,
        poll_interval=0.05,
    )
    key = f"{redis_prefix}effects"
    runs: list[str] = []
    failures = [RuntimeError("downstream unavailable")]

    @receiver.on_completed(atomic=True)
    async def count(event: ProcessCompleted, writes: RedisWrites) -> None:
        runs.append(event.process_id)
        writes.call("HINCRBY", key, event.process_id, 1)

    @receiver.on_completed()
    async def flaky(event: ProcessCompleted) -> None:
        if failures:
            raise failures.pop()

    async with serve(receiver) as client:
        for _ in range(3):  # the service's duplicates
            response = await client.post(HOOK, data=encode(hook_payload("proc-1")), headers=JSON)
            assert response.status == 200
        await idle(receiver)
    assert runs == ["proc-1", "proc-1"]
    assert await raw_redis.hget(key, "proc-1") == b"1"
    assert receiver.metrics.processed == 1
    assert receiver.metrics.retried == 1


async def test_handlers_run_in_order_and_an_atomic_one_runs_again_after_an_interrupted_one(
    redis_url: str, redis_prefix: str, raw_redis: redis.asyncio.Redis
) -> None:
    """One event's handlers run one after another in the order registered, each whatever became
    of the one before; a plain handler cut off by ``handler_timeout`` on the first attempt makes
    the atomic one after it run again on the retry (its writes were dropped with the attempt),
    while the plain one that succeeded is skipped.  The writes land once."""
    receiver = WebhookReceiver(
        inbox=RedisInbox(redis_url, prefix=redis_prefix),
        verifier=TokenVerifier(HOOK.rsplit("/", 1)[1]),
        handler_timeout=0.2,
        retry_base=0.01,
        poll_interval=0.05,
    )
    key = f"{redis_prefix}effects"
    runs: list[tuple[str, int]] = []

    @receiver.on_completed()
    async def slow_first(event: ProcessCompleted, info: DeliveryInfo) -> None:
        runs.append(("slow_first", info.attempt))
        if info.attempt == 1:
            await asyncio.sleep(30)  # cut off by handler_timeout

    @receiver.on_completed(atomic=True)
    async def count(event: ProcessCompleted, writes: RedisWrites, info: DeliveryInfo) -> None:
        runs.append(("count", info.attempt))
        writes.call("HINCRBY", key, event.process_id, 1)

    @receiver.on_completed()
    async def plain_last(event: ProcessCompleted, info: DeliveryInfo) -> None:
        runs.append(("plain_last", info.attempt))

    async with serve(receiver) as client:
        response = await client.post(HOOK, data=encode(hook_payload("proc-o")), headers=JSON)
        assert response.status == 200
        await idle(receiver)
    assert runs == [
        ("slow_first", 1),
        ("count", 1),
        ("plain_last", 1),
        ("slow_first", 2),
        ("count", 2),
    ]
    assert await raw_redis.hget(key, "proc-o") == b"1"


@pytest.mark.slow
async def test_a_process_killed_between_handler_and_ack_leaves_one_effect(
    redis_url: str, redis_prefix: str, raw_redis: redis.asyncio.Redis
) -> None:
    """SIGKILL after the handler queued its writes: the entry goes to another process, whose run
    applies the writes; the killed run applied none."""
    doomed = await start_node(redis_url, redis_prefix, "doomed", "atomic-die")
    async with aiohttp.ClientSession() as session:
        async with session.post(doomed.hook_url, json=payload("proc-k", 0)) as response:
            assert response.status == 200  # stored before the answer
        async with asyncio.timeout(30):  # a guard against a hang only
            assert await stop_node(doomed, 0) == -9  # the handler killed its own process
        assert await raw_redis.hget(f"{redis_prefix}test:runs", "proc-k") == b"1"
        assert await raw_redis.hget(f"{redis_prefix}test:effects", "proc-k") is None

        heir = await start_node(redis_url, redis_prefix, "heir", "atomic")
        try:
            check = RedisInbox(redis_url, prefix=redis_prefix)
            try:
                async with asyncio.timeout(30):  # a guard against a hang only
                    while await check.pending_count():  # noqa: ASYNC110 - state is in Redis
                        await asyncio.sleep(0.05)
            finally:
                await check.close()
            # A duplicate delivery afterwards is refused by the dedup key, not handled again.
            async with session.post(heir.hook_url, json=payload("proc-k", 1)) as response:
                assert response.status == 200
                assert (await response.json())["status"] == "duplicate"
        finally:
            await stop_node(heir)
    assert await raw_redis.hget(f"{redis_prefix}test:runs", "proc-k") == b"2"
    assert await raw_redis.hget(f"{redis_prefix}test:effects", "proc-k") == b"1"
