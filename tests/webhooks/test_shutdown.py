"""Stopping a receiver: deliveries refused, running work finished or handed back, nothing lost."""

from __future__ import annotations

import asyncio

from whtools import (
    HOOK,
    JSON,
    GatedInbox,
    Recorder,
    encode,
    make_receiver,
    payload,
    serve,
    wait_until,
)

from asyncsdk import ProcessCompleted
from webhooks import MemoryInbox


async def test_stopping_refuses_new_deliveries_finishes_the_running_one_and_says_drained() -> None:
    receiver = make_receiver(drain_timeout=10.0)
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


async def test_shutdown_refuses_new_deliveries_and_drains_running_work() -> None:
    inbox = MemoryInbox()
    receiver = make_receiver(inbox, drain_timeout=30, close_inbox=False)
    started, gate = asyncio.Event(), asyncio.Event()
    seen = Recorder()

    @receiver.on_completed()
    async def slow(event: ProcessCompleted) -> None:
        started.set()
        await gate.wait()
        await seen(event)

    async with serve(receiver) as client:
        await client.post(HOOK, data=encode(payload("p-1")), headers=JSON)
        async with asyncio.timeout(10):
            await started.wait()
        stopping = asyncio.create_task(receiver.stop())
        await wait_until(lambda: not receiver.running, "stop began")
        refused = await client.post(HOOK, data=encode(payload("p-2")), headers=JSON)
        assert refused.status == 503
        assert "Retry-After" in refused.headers
        assert not stopping.done()
        gate.set()
        await stopping
    assert seen.ids == ["p-1"]
    assert await inbox.pending_count() == 0


async def test_work_past_the_drain_deadline_stays_in_the_inbox() -> None:
    inbox = MemoryInbox()
    first = make_receiver(inbox, drain_timeout=0.05, close_inbox=False)
    started = asyncio.Event()

    @first.on_completed()
    async def never(event: ProcessCompleted) -> None:
        started.set()
        await asyncio.Event().wait()

    async with serve(first) as client:
        await client.post(HOOK, data=encode(payload("p-1")), headers=JSON)
        async with asyncio.timeout(10):
            await started.wait()
    assert await inbox.pending_count() == 1

    second = make_receiver(inbox)
    seen = Recorder()
    second.on_completed()(seen)
    async with serve(second):
        await wait_until(lambda: seen.ids == ["p-1"], "the next run handled it")


async def test_claimed_entries_no_worker_started_are_handed_back_at_stop() -> None:
    """Under a backlog the pool claims ahead of its workers; stopping releases those at once
    (another process need not wait for their claims to time out) and they keep their place."""
    inbox = MemoryInbox(claim_timeout=3600, clock=lambda: 0.0)
    receiver = make_receiver(inbox, workers=1, drain_timeout=0.05, close_inbox=False)
    started = asyncio.Event()

    @receiver.on_completed()
    async def never(event: ProcessCompleted) -> None:
        started.set()
        await asyncio.Event().wait()

    async with serve(receiver) as client:
        for n in range(4):
            await client.post(HOOK, data=encode(payload(f"p-{n}")), headers=JSON)
        async with asyncio.timeout(10):
            await started.wait()
        # One entry runs; one more is claimed in reserve behind it.
        await wait_until(lambda: receiver._pool.in_flight == 2, "a reserve claimed")
    # Both are due again now: the running one was cancelled past drain_timeout, the queued one
    # was handed back unstarted.
    again = await inbox.claim_batch("another-process", 10)
    assert sorted(e.event.process_id for e in again) == ["p-0", "p-1", "p-2", "p-3"]
    queued = [e for e in again if e.last_error == "the receiver stopped before the entry started"]
    assert len(queued) == 1


async def test_an_entry_stored_while_the_receiver_stops_is_handed_back_at_once() -> None:
    # The put started while a worker was free, so it hands its entry to this receiver; the
    # receiver stops before the write is done.  Once it is, the entry goes back to the inbox at
    # once, for another node, rather than after the claim times out (a minute).
    inbox = GatedInbox()
    receiver = make_receiver(inbox, put_timeout=5.0, close_inbox=False)
    async with serve(receiver) as client:
        post = asyncio.create_task(client.post(HOOK, data=encode(payload("p-1")), headers=JSON))
        async with asyncio.timeout(10):
            await inbox.entered.wait()
        stopping = asyncio.create_task(receiver.stop())
        await asyncio.sleep(0.05)
        inbox.gate.set()
        await stopping
        assert await (await post).json() == {"status": "accepted"}
    (entry,) = await inbox.claim_batch("another-node", 10)
    assert entry.event.process_id == "p-1"
    assert entry.last_error == "the receiver stopped before the entry started"
