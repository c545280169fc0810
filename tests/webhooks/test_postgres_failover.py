"""A failover to a streaming standby under a running receiver whose DSN names both hosts
(``target_session_attrs=read-write``): the receiver goes on on the promoted standby by itself.
With synchronous replication no delivery answered 2xx is lost; with asynchronous replication
the deliveries answered while the standby lagged are lost, and the receiver reports them (an
error line, ``stats().lost``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import asyncpg
import pytest
from own_servers import OwnServer, own_postgres, own_standby
from whtools import HOOK, JSON, TOKEN, encode, idle, payload, serve, wait_until

from asyncsdk import ProcessCompleted
from webhooks import TokenVerifier, WebhookReceiver

pytestmark = pytest.mark.postgres

BEFORE, DURING = 10, 5
RETRY_FOR = 60.0  # a guard against a hang, not a speed requirement


async def until_streaming(primary: OwnServer, state: str) -> None:
    """Wait until the standby streams, its sync_state ``state`` (``sync`` or ``async``)."""
    conn = await asyncpg.connect(primary.url)
    try:
        for _ in range(300):
            states = await conn.fetch("SELECT sync_state FROM pg_stat_replication")
            if [row["sync_state"] for row in states] == [state]:
                return
            await asyncio.sleep(0.05)
    finally:
        await conn.close()
    raise AssertionError(f"the standby never streamed as {state}")


async def until_caught_up(primary: OwnServer) -> None:
    """Wait until the standby has flushed every byte of WAL the primary wrote so far."""
    conn = await asyncpg.connect(primary.url)
    try:
        for _ in range(300):
            if await conn.fetchval(
                "SELECT bool_and(flush_lsn >= pg_current_wal_lsn()) FROM pg_stat_replication"
            ):
                return
            await asyncio.sleep(0.05)
    finally:
        await conn.close()
    raise AssertionError("the standby never caught up")


async def promote(standby: OwnServer) -> None:
    """Start the standby again (it was killed while the primary committed) and promote it."""
    standby.start()
    conn = await asyncpg.connect(standby.url)
    try:
        assert await conn.fetchval("SELECT pg_promote()") is True
    finally:
        await conn.close()


async def stored(server: OwnServer) -> int:
    conn = await asyncpg.connect(server.url)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM webhooks.inbox"))
    finally:
        await conn.close()


class Node:
    """A receiver on both hosts, serving, with what it answered 2xx and what it handled."""

    def __init__(self, post: Callable[[str], Awaitable[int]], receiver: WebhookReceiver) -> None:
        self.post = post
        self.receiver = receiver
        self.answered: list[str] = []
        self.handled: set[str] = set()

    async def deliver(self, process_id: str) -> None:
        """Post until answered 2xx, as a sender retries."""
        deadline = time.monotonic() + RETRY_FOR
        while (status := await self.post(process_id)) != 200:
            assert time.monotonic() < deadline, f"{process_id}: still {status}"
            await asyncio.sleep(0.1)
        self.answered.append(process_id)


@pytest.fixture
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[tuple[OwnServer, OwnServer]]:
    """A primary and its streaming standby, ``sync`` or ``async`` (the test's indirect
    parameter): (primary, standby)."""
    mode = str(request.param)
    settings = ("synchronous_standby_names=standby",) if mode == "sync" else ()
    with own_postgres(settings=settings) as primary, own_standby(primary) as standby:
        await until_streaming(primary, mode)
        yield primary, standby


@pytest.fixture
async def node(cluster: tuple[OwnServer, OwnServer]) -> AsyncIterator[Node]:
    primary, standby = cluster
    dsn = (
        f"postgresql://postgres@127.0.0.1:{primary.port},127.0.0.1:{standby.port}/postgres"
        "?target_session_attrs=read-write"
    )
    # Claims lapse after 2 s: an entry whose claim or ack a failover lost is taken over soon.
    receiver = WebhookReceiver.from_postgres(
        dsn, verifier=TokenVerifier(TOKEN), poll_interval=0.05, claim_timeout=2.0
    )
    async with serve(receiver) as client:

        async def post(process_id: str) -> int:
            response = await client.post(HOOK, data=encode(payload(process_id)), headers=JSON)
            return response.status

        made = Node(post, receiver)

        @receiver.on_completed()
        async def record(event: ProcessCompleted) -> None:
            made.handled.add(event.process_id)

        yield made
        await idle(receiver, 60)  # what the inbox holds is handled and acked


@pytest.mark.parametrize("cluster", ["sync"], indirect=True)
async def test_a_synchronous_standby_loses_no_answered_delivery(
    cluster: tuple[OwnServer, OwnServer], node: Node
) -> None:
    primary, standby = cluster
    for n in range(BEFORE):
        await node.deliver(f"p-{n}")
    standby.kill()  # from now on no commit on the primary can complete
    during = [asyncio.create_task(node.post(f"q-{n}")) for n in range(DURING)]
    await asyncio.sleep(1.0)
    primary.kill()
    assert 200 not in await asyncio.gather(*during)  # none answered 2xx: none could be lost
    await promote(standby)
    for n in range(DURING):
        await node.deliver(f"q-{n}")  # the sender's retries, accepted by the promoted standby
    await wait_until(lambda: node.handled >= set(node.answered), "answered events handled", 60)
    assert await stored(standby) == BEFORE + DURING
    assert node.handled == set(node.answered)


@pytest.mark.parametrize("cluster", ["async"], indirect=True)
async def test_an_asynchronous_standby_loses_what_it_had_not_received(
    cluster: tuple[OwnServer, OwnServer], node: Node, caplog: pytest.LogCaptureFixture
) -> None:
    primary, standby = cluster
    for n in range(BEFORE):
        await node.deliver(f"p-{n}")
    await until_caught_up(primary)
    standby.kill()  # it lags from now on: the primary commits without it
    for n in range(DURING):
        await node.deliver(f"q-{n}")  # answered 2xx at once
    primary.kill()
    await promote(standby)
    # The deliveries answered while the standby lagged are gone from the promoted standby.
    assert await stored(standby) == BEFORE
    assert len(node.answered) == BEFORE + DURING

    # Never silent: the receiver's next connection reaches another server, and it looks for
    # what it answered lately: one error line, and the count in stats() for every node.
    def loss_lines() -> list[str]:
        return [r.getMessage() for r in caplog.records if "acknowledged deliver" in r.getMessage()]

    await wait_until(lambda: bool(loss_lines()), "the loss to be reported", 30)
    (line,) = loss_lines()
    assert f"lost {DURING} acknowledged deliveries of the inbox in schema 'webhooks'" in line
    stats = await node.receiver.inbox.stats()
    assert stats.lost == DURING
    assert stats.last_loss is not None
