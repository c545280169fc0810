"""A handler that fails: retried with its attempt number, dead-lettered, replayed; the workers
carry on whatever it raises."""

from __future__ import annotations

import asyncio
from collections import Counter

from whtools import (
    HOOK,
    JSON,
    Recorder,
    bare_receiver,
    encode,
    event,
    eventually,
    idle,
    make_receiver,
    payload,
    serve,
    wait_until,
)

from asyncsdk import ProcessCompleted
from webhooks import DeliveryInfo, MemoryInbox


async def test_a_handler_that_asks_gets_its_attempt_number_and_others_only_the_event() -> None:
    receiver = make_receiver(retry_base=0.01, retry_cap=0.02)
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
    receiver = make_receiver(max_attempts=1)
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


async def test_failing_handlers_retry_then_dead_letter_then_replay() -> None:
    receiver = make_receiver(max_attempts=3, retry_base=0.01, retry_cap=0.02)
    calls: list[str] = []
    broken = True
    ok = Recorder()
    receiver.on_completed()(ok)

    @receiver.on_completed()
    async def flaky(event: ProcessCompleted) -> None:
        calls.append(event.process_id)
        if broken:
            raise RuntimeError("downstream is down")

    async with serve(receiver) as client:
        response = await client.post(HOOK, data=encode(payload("p-1")), headers=JSON)
        assert response.status == 200
        dead = await eventually(receiver.dead_letters, "a dead letter")
        assert len(calls) == 3
        (entry,) = dead
        assert entry.event.process_id == "p-1"
        assert entry.attempts == 3
        assert entry.last_error is not None
        assert "downstream is down" in entry.last_error
        assert receiver.metrics.dead_lettered == 1

        broken = False
        await receiver.replay(entry.id)
        await idle(receiver)
        assert await receiver.dead_letters() == []
    assert len(calls) == 4
    # The handler that succeeded the first time was not called again.
    assert ok.ids == ["p-1"]
    assert receiver.metrics.processed == 1


async def test_a_handler_timeout_counts_as_a_failure() -> None:
    receiver = make_receiver(handler_timeout=0.05, max_attempts=1)

    @receiver.on_completed()
    async def stuck(event: ProcessCompleted) -> None:
        await asyncio.Event().wait()

    async with serve(receiver) as client:
        await client.post(HOOK, data=encode(payload()), headers=JSON)
        dead = await eventually(receiver.dead_letters, "a dead letter")
    assert dead[0].last_error is not None
    assert "timed out" in dead[0].last_error


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

    receiver = bare_receiver(inbox, workers=2, retry_base=0.01, retry_cap=0.01, poll_interval=0.05)
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
    receiver = bare_receiver(
        inbox,
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
