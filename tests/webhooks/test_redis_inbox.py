"""RedisInbox keeps the inbox contract on a real Redis, and what only a shared inbox must do."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis.asyncio
from inbox_contract import (
    CLAIM_TIMEOUT,
    ClaimingInboxContract,
    OpenInbox,
    SharedInboxContract,
    event,
)

from asyncsdk import ConfigurationError
from webhooks import (
    Inbox,
    InboxError,
    InboxUnavailableError,
    RedisInbox,
)

pytestmark = pytest.mark.redis


class TestRedisInbox(ClaimingInboxContract):
    @pytest.fixture
    async def inbox(self, redis_url: str, redis_prefix: str) -> AsyncIterator[Inbox]:
        inbox = RedisInbox(redis_url, prefix=redis_prefix, claim_timeout=CLAIM_TIMEOUT)
        yield inbox
        await inbox.close()


class TestSharedRedisInbox(SharedInboxContract):
    @pytest.fixture
    async def open_inbox(self, redis_url: str, redis_prefix: str) -> AsyncIterator[OpenInbox]:
        opened: list[RedisInbox] = []

        def open_inbox() -> RedisInbox:
            opened.append(RedisInbox(redis_url, prefix=redis_prefix, claim_timeout=CLAIM_TIMEOUT))
            return opened[-1]

        yield open_inbox
        for inbox in opened:
            await inbox.close()


async def test_a_claimed_put_hands_out_the_oldest_entry_nobody_took(
    redis_url: str, redis_prefix: str
) -> None:
    # The consumer group hands out new entries in stream order: with p-1 waiting, the put of
    # p-2 hands p-1 to the consumer, and p-2 waits for the next claim.
    inbox = RedisInbox(redis_url, prefix=redis_prefix)
    try:
        assert await inbox.put(event("p-1"), b"first") is True
        entry = await inbox.submit_put_claimed(event("p-2"), b"second", "c1")
        assert entry is not None
        assert (entry.event, entry.raw, entry.attempts) == (event("p-1"), b"first", 1)
        (later,) = await inbox.claim_batch("c2", 10)
        assert (later.event, later.raw, later.attempts) == (event("p-2"), b"second", 1)
    finally:
        await inbox.close()


async def test_the_oldest_age_is_the_oldest_unfinished_entry_in_any_state(
    redis_url: str, redis_prefix: str
) -> None:
    inbox = RedisInbox(redis_url, prefix=redis_prefix)

    async def oldest_age() -> float:
        age = (await inbox.stats()).oldest_age
        assert age is not None
        return age

    try:
        await inbox.put(event("p-1"), b"first")
        await asyncio.sleep(0.3)
        await inbox.put(event("p-2"), b"second")
        await asyncio.sleep(0.3)
        # p-1 is 0.6 s old, p-2 0.3 s: an age over 0.5 s is p-1's
        assert await oldest_age() >= 0.5  # p-1, new
        (first,) = await inbox.claim_batch("c1", 1)
        assert await oldest_age() >= 0.5  # p-1, claimed
        await inbox.retry_later(first.id, "not yet", delay=60)
        assert await oldest_age() >= 0.5  # p-1, delayed
        (second,) = await inbox.claim_batch("c1", 1)
        assert second.event == event("p-2")
        await inbox.dead_letter(second.id, "gave up")
        assert await oldest_age() >= 0.5  # p-1 still
        stats = await inbox.stats()
        assert (stats.depth, stats.dead) == (1, 1)
    finally:
        await inbox.close()


async def test_dead_letters_however_many_do_not_hide_the_oldest_entry(
    redis_url: str, redis_prefix: str
) -> None:
    """The age is read from the states that hold unfinished entries: no walk over the dead
    letters before them, which an idle node would repeat at every read of its figures."""
    inbox = RedisInbox(redis_url, prefix=redis_prefix)
    try:
        await asyncio.gather(*(inbox.put(event(f"p-{n}"), b"x") for n in range(1_100)))
        claimed = await inbox.claim_batch("c1", 1_100)
        await asyncio.gather(*(inbox.dead_letter(entry.id, "gave up") for entry in claimed))
        await inbox.put(event("p-live"), b"y")
        stats = await inbox.stats()
        assert (stats.depth, stats.dead) == (1, 1_100)
        assert stats.oldest_age is not None
        assert 0.0 <= stats.oldest_age < 5.0
    finally:
        await inbox.close()


async def test_ack_deletes_the_entry_so_the_stream_stays_small(
    redis_url: str, redis_prefix: str, raw_redis: redis.asyncio.Redis
) -> None:
    inbox = RedisInbox(redis_url, prefix=redis_prefix)
    try:
        for n in range(20):
            await inbox.put(event(f"p-{n}"), b"x")
        assert await raw_redis.xlen(f"{redis_prefix}inbox:stream") == 20
        for entry in await inbox.claim_batch("c1", 20):
            await inbox.ack(entry.id)
        assert await raw_redis.xlen(f"{redis_prefix}inbox:stream") == 0
        assert await raw_redis.hlen(f"{redis_prefix}inbox:attempts") == 0
    finally:
        await inbox.close()


async def test_an_ack_keeps_the_dedup_key_for_the_retention_whichever_node_acks(
    redis_url: str, redis_prefix: str, raw_redis: redis.asyncio.Redis
) -> None:
    # The node that handed an entry out acks it with the dedup key it read; another node's ack
    # reads the key from the entry.  Either way the key lasts the retention from the ack, even
    # when it had almost run out, or had run out, before.
    here = RedisInbox(redis_url, prefix=redis_prefix, retention=3600)
    there = RedisInbox(redis_url, prefix=redis_prefix, retention=3600)
    try:
        for name in ("p-1", "p-2", "p-3", "p-4"):
            assert await here.put(event(name), name.encode()) is True
        entries = await here.claim_batch("c1", 4)
        dedup_keys = {}
        for entry in entries:
            pattern = f'{redis_prefix}inbox:dedup:*"{entry.raw.decode()}"*'
            (dedup_keys[entry.id],) = [k async for k in raw_redis.scan_iter(match=pattern)]
        one, two, three, four = entries
        await raw_redis.expire(dedup_keys[one.id], 5)
        await raw_redis.delete(dedup_keys[two.id])
        await raw_redis.expire(dedup_keys[three.id], 5)
        await raw_redis.delete(dedup_keys[four.id])
        await here.ack_many([one.id, two.id])
        await there.ack_many([three.id, four.id])
        for entry in entries:
            assert 3500 < await raw_redis.ttl(dedup_keys[entry.id]) <= 3600, entry.raw
            assert await there.put(entry.event, entry.raw) is False
        assert await raw_redis.xlen(f"{redis_prefix}inbox:stream") == 0
    finally:
        await here.close()
        await there.close()


async def test_a_retention_of_one_second_is_renewed_while_puts_come(
    redis_url: str, redis_prefix: str, raw_redis: redis.asyncio.Redis
) -> None:
    # The keys are renewed when their TTL is a second (half of it, under two seconds) short of
    # the retention: with a retention of one second, puts every 0.2 s keep the stream alive.
    inbox = RedisInbox(redis_url, prefix=redis_prefix, retention=1)
    try:
        for number in range(12):
            assert await inbox.put(event(f"p-{number}"), b"{}") is True
            await asyncio.sleep(0.2)
        assert await raw_redis.xlen(f"{redis_prefix}inbox:stream") == 12
        assert len(await inbox.claim_batch("c1", 20)) == 12
    finally:
        await inbox.close()


async def test_a_client_of_another_encoding_acks_with_the_dedup_key_as_stored(
    redis_url: str, redis_prefix: str
) -> None:
    # The dedup key is JSON text with the process id as given; a client encoding latin-1 writes
    # it so.  The node that claims the entry sends the key back as the bytes it read.
    client = redis.asyncio.Redis.from_url(redis_url, encoding="latin-1")
    inbox = RedisInbox(prefix=redis_prefix, client=client)
    try:
        assert await inbox.put(event("p-\u00fc"), b"{}") is True
        (entry,) = await inbox.claim_batch("c1", 10)
        await inbox.ack(entry.id)
        assert await inbox.pending_count() == 0
        assert await inbox.put(event("p-\u00fc"), b"{}") is False
    finally:
        await inbox.close()
        await client.aclose()


async def test_one_ack_many_takes_ten_thousand_ids(
    redis_url: str, redis_prefix: str, raw_redis: redis.asyncio.Redis
) -> None:
    # A script call takes a batch of ids; Lua unpacks at most about 8,000 values at once.
    inbox = RedisInbox(redis_url, prefix=redis_prefix)
    try:
        for name in ("p-1", "p-2"):
            await inbox.put(event(name), name.encode())
        entries = await inbox.claim_batch("c1", 10)
        unknown = [f"1-{n}" for n in range(10_000)]
        await inbox.ack_many([entries[0].id, *unknown, entries[1].id])
        assert await inbox.pending_count() == 0
        assert await raw_redis.xlen(f"{redis_prefix}inbox:stream") == 0
    finally:
        await inbox.close()


async def test_every_key_is_under_the_prefix_and_expires(
    redis_url: str, redis_prefix: str, raw_redis: redis.asyncio.Redis
) -> None:
    inbox = RedisInbox(redis_url, prefix=redis_prefix, retention=3600)
    try:
        await inbox.put(event("p-1"), b"one")
        await inbox.put(event("p-2"), b"two")
        await inbox.put(event("p-3"), b"three")
        one, two, three = await inbox.claim_batch("c1", 10)
        await inbox.retry_later(one.id, "later", 600)
        await inbox.dead_letter(two.id, "dead")
        await inbox.ack(three.id)

        keys = [k.decode() async for k in raw_redis.scan_iter(match=f"{redis_prefix}*")]
        assert {k.removeprefix(redis_prefix).split(":")[1] for k in keys} == {
            "stream",
            "attempts",
            "errors",
            "delayed",
            "dead",
            "dedup",
            "seq",
        }
        assert len([k for k in keys if ":dedup:" in k]) == 3
        for key in keys:
            ttl = await raw_redis.ttl(key)
            if key.endswith(":seq"):  # the count of accepted entries outlives them, to find losses
                assert ttl == -1
                assert await raw_redis.get(key) == b"3"
            else:
                assert 3500 < ttl <= 3600, key
        # Nothing was written outside the prefix: a second inbox on another prefix sees nothing.
        other = RedisInbox(redis_url, prefix=redis_prefix + "other:")
        try:
            assert await other.pending_count() == 0
            assert await other.put(event("p-1"), b"one") is True
        finally:
            await other.close()
    finally:
        await inbox.close()


async def test_a_put_claimed_on_a_fresh_inbox_leaves_every_key_expiring(
    redis_url: str, redis_prefix: str, raw_redis: redis.asyncio.Redis
) -> None:
    # The script that stores and hands out in one step creates the stream and the consumer group;
    # the attempts hash appears with an entry's second hand-out, after the claim that made it.
    inbox = RedisInbox(redis_url, prefix=redis_prefix, retention=3600, claim_timeout=0.2)
    try:
        entry = await inbox.submit_put_claimed(event("p-1"), b"one", "c1")
        assert entry is not None
        assert entry.attempts == 1
        await asyncio.sleep(0.3)
        (again,) = await inbox.claim_batch("c2", 10)
        assert again.attempts == 2
        keys = [k.decode() async for k in raw_redis.scan_iter(match=f"{redis_prefix}*")]
        assert any(key.endswith(":stream") for key in keys)
        assert any(key.endswith(":attempts") for key in keys)
        for key in keys:
            ttl = await raw_redis.ttl(key)
            if key.endswith(":seq"):
                assert ttl == -1
            else:
                assert 3500 < ttl <= 3600, key
    finally:
        await inbox.close()


async def test_a_failed_append_leaves_no_dedup_claim(
    redis_url: str, redis_prefix: str, raw_redis: redis.asyncio.Redis
) -> None:
    # A key of the wrong type where the stream should be makes XADD fail inside the script.
    await raw_redis.set(f"{redis_prefix}inbox:stream", "not a stream")
    inbox = RedisInbox(redis_url, prefix=redis_prefix)
    try:
        with pytest.raises(InboxError, match="WRONGTYPE"):
            await inbox.put(event(), b"x")
        assert [k async for k in raw_redis.scan_iter(match=f"{redis_prefix}inbox:dedup:*")] == []
        await raw_redis.delete(f"{redis_prefix}inbox:stream")
        assert await inbox.put(event(), b"x") is True  # the sender's retry is accepted
    finally:
        await inbox.close()


async def test_unreachable_redis_is_inbox_unavailable() -> None:
    inbox = RedisInbox("redis://127.0.0.1:1/0")
    try:
        with pytest.raises(InboxUnavailableError, match="cannot be reached"):
            await inbox.put(event(), b"x")
        with pytest.raises(InboxUnavailableError):
            await inbox.check()
    finally:
        await inbox.close()


def test_bad_options_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="redis://"):
        RedisInbox("http://127.0.0.1:6379")
    with pytest.raises(ConfigurationError, match="prefix must be a non-empty str"):
        RedisInbox(prefix="")
    with pytest.raises(ConfigurationError, match="glob"):
        RedisInbox(prefix="app*:")
    with pytest.raises(ConfigurationError, match="claim_timeout must be more than 0"):
        RedisInbox(claim_timeout=0)


async def test_a_decoding_client_is_refused(redis_url: str) -> None:
    client = redis.asyncio.Redis.from_url(redis_url, decode_responses=True)
    try:
        with pytest.raises(ConfigurationError, match="decode_responses"):
            RedisInbox(client=client)
    finally:
        await client.aclose()
