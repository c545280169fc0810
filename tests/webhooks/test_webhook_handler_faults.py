"""A handler that fails in an unusual way: the workers carry on."""

from __future__ import annotations

import asyncio
from collections import Counter

from inbox_contract import event
from whtools import wait_until

from asyncsdk import ProcessCompleted
from webhooks import MemoryInbox, NoVerification, WebhookReceiver


def receiver_for(inbox: MemoryInbox, **options: object) -> WebhookReceiver:
    return WebhookReceiver(inbox=inbox, verifier=NoVerification(), **options)  # type: ignore[arg-type]


async def test_a_handler_raising_cancelled_error_is_retried_and_the_workers_carry_on() -> None:
    # A library inside a handler may raise CancelledError of its own (a future someone else
    # cancelled).  That is the handler failing, not the receiver stopping: before, it ended the
    # worker for good, and the next entry handed back ended the next one, until none was left.
    inbox = MemoryInbox()
    for n in range(6):
        assert await inbox.put(event(f"p-{n}"), b"{}")
    calls: Counter[str] = Counter()
    handled: list[str] = []

    async def handler(received: ProcessCompleted) -> None:
        calls[received.process_id] += 1
        if calls[received.process_id] == 1:
            raise asyncio.CancelledError  # the first attempt of each event
        handled.append(received.process_id)

    receiver = receiver_for(inbox, workers=2, retry_base=0.01, retry_cap=0.01, poll_interval=0.05)
    receiver.add_handler(handler)
    await receiver.start()
    try:
        await wait_until(lambda: receiver.metrics.processed == 6, "every event handled and acked")
        assert receiver.metrics.retried == 6
        assert await inbox.dead_letters() == []
    finally:
        await receiver.stop()
    assert sorted(handled) == [f"p-{n}" for n in range(6)]
    assert set(calls.values()) == {2}


class CancellingSink:
    """A result sink whose resolve raises CancelledError of its own."""

    def __init__(self) -> None:
        self.calls = 0

    async def resolve(self, event: ProcessCompleted) -> None:
        self.calls += 1
        raise asyncio.CancelledError


async def test_a_result_sink_raising_cancelled_error_is_retried_then_dead_lettered() -> None:
    # Before, the entry was dropped until its claim timed out, then handed out again, forever:
    # never counted as failed, never dead-lettered.
    inbox = MemoryInbox(claim_timeout=0.3)
    assert await inbox.put(event("p-1"), b"{}")
    sink = CancellingSink()
    receiver = WebhookReceiver(
        inbox=inbox,
        verifier=NoVerification(),
        registry=sink,
        max_attempts=2,
        retry_base=0.01,
        retry_cap=0.01,
        poll_interval=0.05,
    )
    await receiver.start()
    try:
        await wait_until(lambda: receiver.metrics.dead_lettered == 1, "the dead letter")
    finally:
        await receiver.stop()
    assert sink.calls == 2
    assert receiver.metrics.retried == 1
