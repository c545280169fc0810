"""The worker pool's claims and acks: acks sent together, held until done, claims sized by pace."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from inbox_contract import event
from whtools import JSON, Recorder, bare_receiver, encode, payload, serve, wait_until

from asyncsdk import ProcessCompleted
from webhooks import (
    Inbox,
    InboxEntry,
    InboxUnavailableError,
    MemoryInbox,
    NoVerification,
    WebhookReceiver,
)
from webhooks.contract import ClaimingInbox


class PacedInbox(MemoryInbox):
    """A memory inbox with the round trips of a remote store, that records its claims and acks."""

    def __init__(
        self, *, claim_delay: float = 0.0, ack_delay: float = 0.0, claim_timeout: float = 60.0
    ) -> None:
        super().__init__(claim_timeout=claim_timeout)
        self.claim_delay = claim_delay
        self.ack_delay = ack_delay
        self.claim_limits: list[int] = []
        self.ack_calls: list[int] = []

    async def claim_batch(self, consumer: str, limit: int) -> list[InboxEntry]:
        self.claim_limits.append(limit)
        await asyncio.sleep(self.claim_delay)
        return await super().claim_batch(consumer, limit)

    async def ack_many(self, entry_ids: Sequence[str]) -> None:
        self.ack_calls.append(len(entry_ids))
        await asyncio.sleep(self.ack_delay)
        await super().ack_many(entry_ids)


async def store(inbox: MemoryInbox, count: int) -> None:
    for n in range(count):
        assert await inbox.put(event(f"p-{n}"), b"{}")


async def test_acks_of_entries_finished_together_go_out_together() -> None:
    inbox = PacedInbox(ack_delay=0.02)
    await store(inbox, 200)
    receiver = bare_receiver(inbox)
    seen = Recorder()
    receiver.add_handler(seen)
    await receiver.start()
    try:
        await wait_until(lambda: receiver.metrics.processed == 200, "every event acked")
    finally:
        await receiver.stop()
    assert sorted(seen.ids) == sorted(f"p-{n}" for n in range(200))
    assert sum(inbox.ack_calls) == 200
    assert len(inbox.ack_calls) < 50  # many entries finish during one ack's round trip


async def test_an_entry_waiting_for_its_ack_keeps_its_claim() -> None:
    inbox = PacedInbox(ack_delay=1.0, claim_timeout=0.3)
    await store(inbox, 1)
    receiver = bare_receiver(inbox, poll_interval=10.0, close_inbox=False)
    seen = Recorder()
    receiver.add_handler(seen)
    await receiver.start()
    try:
        await wait_until(lambda: len(inbox.ack_calls) == 1, "the ack to be on its way")
        assert receiver._pool.in_flight == 1  # held while its ack is on the wire
        # Past the claim timeout, another process finds nothing to take: the claim was renewed.
        await asyncio.sleep(0.5)
        assert await MemoryInbox.claim_batch(inbox, "another-process", 10) == []
        await wait_until(lambda: receiver.metrics.processed == 1, "the ack to finish")
    finally:
        await receiver.stop()
    assert seen.ids == ["p-0"]
    assert receiver._pool.in_flight == 0
    assert await inbox.pending_count() == 0


async def test_stop_waits_for_the_acks_of_finished_entries() -> None:
    inbox = PacedInbox(ack_delay=0.3)
    await store(inbox, 20)
    receiver = bare_receiver(inbox, close_inbox=False)
    seen = Recorder()
    receiver.add_handler(seen)
    await receiver.start()
    await wait_until(lambda: len(seen.events) == 20, "every handler to run")
    await receiver.stop()
    assert receiver.metrics.processed == 20
    assert await inbox.pending_count() == 0


async def test_claims_grow_for_fast_handlers_and_stay_small_for_slow_ones() -> None:
    fast = PacedInbox(claim_delay=0.01)
    await store(fast, 1000)
    receiver = bare_receiver(fast, workers=4)
    receiver.add_handler(Recorder())
    await receiver.start()
    try:
        await wait_until(lambda: receiver.metrics.processed == 1000, "the fast backlog to drain")
    finally:
        await receiver.stop()
    # Entries take microseconds and a claim 10 ms: the reserve covers a claim's round trip.
    assert max(fast.claim_limits) > 2 * 4

    slow = PacedInbox(claim_delay=0.01)
    await store(slow, 24)
    receiver = bare_receiver(slow, workers=4)

    async def slow_handler(_: ProcessCompleted) -> None:
        await asyncio.sleep(0.05)

    receiver.add_handler(slow_handler)
    await receiver.start()
    try:
        await wait_until(lambda: receiver.metrics.processed == 24, "the slow backlog to drain")
    finally:
        await receiver.stop()
    # Entries take 50 ms: no more than one entry per worker waits in reserve.
    assert max(slow.claim_limits) <= 2 * 4


class FirstAckFails(PacedInbox):
    """Its first ``ack_many`` fails, as a store that drops out for a moment would."""

    failed = False

    async def ack_many(self, entry_ids: Sequence[str]) -> None:
        if not self.failed:
            self.failed = True
            raise InboxUnavailableError("the store dropped out")
        await super().ack_many(entry_ids)


async def test_a_failed_ack_does_not_run_succeeded_handlers_again() -> None:
    inbox = FirstAckFails(claim_timeout=0.3)
    await store(inbox, 1)
    receiver = bare_receiver(inbox, poll_interval=0.05)
    seen = Recorder()
    receiver.add_handler(seen)
    await receiver.start()
    try:
        # The ack is sent again; the handler is not called again.
        await wait_until(lambda: receiver.metrics.processed == 1, "the second ack")
    finally:
        await receiver.stop()
    assert inbox.failed
    assert seen.ids == ["p-0"]


class StallingInbox(PacedInbox):
    """A memory inbox whose acks, or whole store, can be switched off for a while, as a store
    that stalls or drops its connections would; another process's claims still reach it."""

    def __init__(self, *, claim_timeout: float) -> None:
        super().__init__(claim_timeout=claim_timeout)
        self.acks_down = False
        self.down = False
        self.failed_acks = 0

    def _check(self, acks: bool = False) -> None:
        if self.down or (acks and self.acks_down):
            if acks:
                self.failed_acks += 1
            raise InboxUnavailableError("the store does not answer")

    async def claim_batch(self, consumer: str, limit: int) -> list[InboxEntry]:
        self._check()
        return await super().claim_batch(consumer, limit)

    async def extend(self, consumer: str, entry_ids: Sequence[str]) -> None:
        self._check()
        await super().extend(consumer, entry_ids)

    async def ack_many(self, entry_ids: Sequence[str]) -> None:
        self._check(acks=True)
        await super().ack_many(entry_ids)


async def nobody_else_gets(inbox: MemoryInbox, seconds: float) -> None:
    """For ``seconds``, another process that claims from ``inbox`` gets nothing."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        assert await MemoryInbox.claim_batch(inbox, "another-process", 10) == []
        await asyncio.sleep(0.05)


async def test_acks_failing_past_the_claim_timeout_are_sent_again_and_the_claim_kept() -> None:
    inbox = StallingInbox(claim_timeout=0.3)
    inbox.acks_down = True
    await store(inbox, 3)
    receiver = bare_receiver(inbox, poll_interval=0.05, close_inbox=False)
    seen = Recorder()
    receiver.add_handler(seen)
    await receiver.start()
    try:
        await wait_until(lambda: inbox.failed_acks >= 2, "the ack to fail, twice")
        # Three claim timeouts with every ack failing: the entries stay with this process,
        # which renews their claims; before, another process took them and ran them again.
        await nobody_else_gets(inbox, 1.0)
        assert receiver._pool.in_flight == 3  # held while their acks are tried again
        inbox.acks_down = False
        await wait_until(lambda: receiver.metrics.processed == 3, "the acks to get through")
    finally:
        await receiver.stop()
    assert sorted(seen.ids) == ["p-0", "p-1", "p-2"]
    assert await inbox.pending_count() == 0


async def test_a_store_down_for_less_than_two_thirds_of_the_claim_timeout_keeps_the_claims() -> (
    None
):
    inbox = StallingInbox(claim_timeout=3.0)
    await store(inbox, 3)
    receiver = bare_receiver(inbox, poll_interval=0.05, close_inbox=False)
    seen = Recorder()
    release = asyncio.Event()

    async def held(event: ProcessCompleted) -> None:
        await seen(event)
        await release.wait()

    receiver.add_handler(held)
    await receiver.start()
    try:
        await wait_until(lambda: len(seen.ids) == 3, "the handlers to start")
        inbox.down = True  # claims, renewals and acks all fail
        # Past a renewal (every 1 s); less than two thirds of the claim timeout less the retry
        # pause (2 - 0.5 s), the most a claim renewed a third of the timeout ago can wait for.
        await asyncio.sleep(1.2)
        inbox.down = False
        # A renewal gets through within its retry pause, before any claim lapses.
        await nobody_else_gets(inbox, 2.0)
        release.set()
        await wait_until(lambda: receiver.metrics.processed == 3, "the acks to get through")
    finally:
        release.set()
        await receiver.stop()
    assert sorted(seen.ids) == ["p-0", "p-1", "p-2"]
    assert await inbox.pending_count() == 0


class OwnInbox:
    """An inbox written by a user: the :class:`Inbox` contract only, no put that claims (here
    over a :class:`PacedInbox`, whose claims it records)."""

    def __init__(self, inner: PacedInbox) -> None:
        self.inner = inner

    @property
    def claim_timeout(self) -> float:
        return self.inner.claim_timeout

    async def put(self, event: ProcessCompleted, raw: bytes) -> bool:
        return await self.inner.put(event, raw)

    def submit_put(self, event: ProcessCompleted, raw: bytes) -> asyncio.Future[bool]:
        return self.inner.submit_put(event, raw)

    async def claim_batch(self, consumer: str, limit: int) -> list[InboxEntry]:
        return await self.inner.claim_batch(consumer, limit)

    async def extend(self, consumer: str, entry_ids: Sequence[str]) -> None:
        await self.inner.extend(consumer, entry_ids)

    async def ack(self, entry_id: str) -> None:
        await self.inner.ack(entry_id)

    async def ack_many(self, entry_ids: Sequence[str]) -> None:
        await self.inner.ack_many(entry_ids)

    async def retry_later(self, entry_id: str, error: str, delay: float) -> None:
        await self.inner.retry_later(entry_id, error, delay)

    async def dead_letter(self, entry_id: str, error: str) -> None:
        await self.inner.dead_letter(entry_id, error)

    async def dead_letters(self, limit: int = 1000) -> list[InboxEntry]:
        return await self.inner.dead_letters(limit)

    async def replay(self, entry_id: str) -> None:
        await self.inner.replay(entry_id)

    async def pending_count(self) -> int:
        return await self.inner.pending_count()

    async def check(self) -> None:
        await self.inner.check()

    async def close(self) -> None:
        await self.inner.close()


async def trickle(inbox: Inbox, count: int) -> list[str]:
    """Deliver ``count`` events one at a time, each finished before the next is sent; the ids
    the handler saw.  No tick comes meanwhile: ``poll_interval`` is a minute."""
    receiver = WebhookReceiver(inbox=inbox, verifier=NoVerification(), poll_interval=60.0)
    seen = Recorder()
    receiver.add_handler(seen)
    async with serve(receiver) as client:
        for n in range(count):
            response = await client.post("/hooks/", data=encode(payload(f"p-{n}")), headers=JSON)
            assert response.status == 200
            await wait_until(lambda n=n: receiver.metrics.processed == n + 1, "the ack")
    return seen.ids


async def test_events_stored_while_a_worker_is_free_reach_it_without_a_claim() -> None:
    inbox = PacedInbox()
    assert isinstance(inbox, ClaimingInbox)
    assert await trickle(inbox, 10) == [f"p-{n}" for n in range(10)]
    assert len(inbox.claim_limits) == 1  # the one at start


async def test_an_inbox_without_claiming_puts_costs_one_claim_per_event() -> None:
    # A worker that runs out asks for more, but nothing is known to wait, so no claim is sent
    # for it: one claim per event, not a second, empty one.
    inbox = PacedInbox()
    own = OwnInbox(inbox)
    assert isinstance(own, Inbox)
    assert not isinstance(own, ClaimingInbox)
    assert await trickle(own, 10) == [f"p-{n}" for n in range(10)]
    assert len(inbox.claim_limits) == 1 + 10


async def test_a_full_claim_is_followed_by_another_while_entries_wait() -> None:
    # Twenty entries stored by another node, which this receiver does not count; one delivery of
    # its own sets off a claim, which comes back full (two workers).  More may be due, so the
    # workers that run low claim again, without waiting for a tick (a minute away).
    inbox = PacedInbox()
    receiver = WebhookReceiver(
        inbox=OwnInbox(inbox), verifier=NoVerification(), workers=2, poll_interval=60.0
    )
    seen = Recorder()
    receiver.add_handler(seen)
    async with serve(receiver) as client:
        await wait_until(lambda: len(inbox.claim_limits) == 1, "the claim at start")
        await store(inbox, 20)
        response = await client.post("/hooks/", data=encode(payload("mine")), headers=JSON)
        assert response.status == 200
        await wait_until(lambda: receiver.metrics.processed == 21, "every entry handled")
    assert sorted(seen.ids) == sorted(["mine", *(f"p-{n}" for n in range(20))])


class SwallowingInbox(MemoryInbox):
    """A memory inbox whose depth count swallows a cancellation (as a store's client library
    under a user's inbox may) and answers instead."""

    def __init__(self) -> None:
        super().__init__(claim_timeout=0.15)
        self.answered = False
        self.swallowing = True
        self.hanging = asyncio.Event()

    async def pending_count(self) -> int:
        if self.answered:  # the start's count is answered, the next hangs
            self.hanging.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                if not self.swallowing:
                    raise
                # swallowed: carries on as if answered
        self.answered = True
        return await super().pending_count()


async def test_stop_ends_even_when_an_inbox_call_swallows_its_cancellation() -> None:
    inbox = SwallowingInbox()
    receiver = bare_receiver(inbox, poll_interval=0.01)
    await receiver.start()
    # The heartbeat counts the inbox's depth every ten ticks; it is in that call now.
    await asyncio.wait_for(inbox.hanging.wait(), 10)
    try:
        async with asyncio.timeout(10):  # before: the heartbeat looped on, stop() never returned
            await receiver.stop()
    finally:
        inbox.swallowing = False  # should this fail, the loop's teardown can end its tasks
