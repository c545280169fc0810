"""Backpressure: 503 with ``Retry-After`` while the inbox is full, and full means the shared inbox.

A receiver refuses deliveries while its inbox holds ``queue_limit`` events, and takes them again
as work drains.  With two receivers on one inbox, as two processes would be, one takes every
delivery and cannot finish anything (its one worker is stuck); the other runs the handlers.  The
first must go on accepting while the shared inbox stays under the limit, however many events it
stored itself; and either refuses, with ``Retry-After``, once the shared inbox truly holds the
limit, whoever stored the events.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from whtools import (
    HOOK,
    JSON,
    TOKEN,
    Recorder,
    encode,
    eventually,
    idle,
    make_receiver,
    payload,
    serve,
)

from asyncsdk import ProcessCompleted
from webhooks import Inbox, MemoryInbox, SQLiteInbox, TokenVerifier, WebhookReceiver

LIMIT = 5

InboxFactory = Callable[[], Inbox]


@pytest.fixture(params=["memory", "sqlite"])
async def shared(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[InboxFactory]:
    """Inboxes over one store: the same MemoryInbox, or SQLiteInbox on one file each time."""
    if request.param == "memory":
        memory = MemoryInbox()
        yield lambda: memory
        await memory.close()
    else:
        yield lambda: SQLiteInbox(tmp_path / "shared.sqlite3")


def receiver(inbox: Inbox, **options: object) -> WebhookReceiver:
    return WebhookReceiver(
        inbox=inbox,
        verifier=TokenVerifier(TOKEN),
        poll_interval=0.05,
        queue_limit=LIMIT,
        close_inbox=not isinstance(inbox, MemoryInbox),
        **options,  # type: ignore[arg-type]
    )


async def test_a_receiver_accepts_while_the_shared_inbox_is_under_its_limit(
    shared: InboxFactory,
) -> None:
    front = receiver(shared(), workers=1)
    back = receiver(shared(), workers=8)
    stuck = asyncio.Event()
    handled: list[str] = []

    @front.on_completed()
    async def never(event: ProcessCompleted) -> None:
        await stuck.wait()

    @back.on_completed()
    async def record(event: ProcessCompleted) -> None:
        handled.append(event.process_id)

    async with serve(front) as client, serve(back):
        # Four times the limit, one after another: the other receiver keeps the inbox short.
        for n in range(4 * LIMIT):
            response = await client.post(HOOK, data=encode(payload(f"p-{n}")), headers=JSON)
            assert response.status == 200, (n, await response.text())

            async def short() -> bool:
                return await front.inbox.pending_count() < LIMIT - 1

            await eventually(short, "the other receiver to take the events")
        assert front.metrics.unavailable["queue_full"] == 0
        stuck.set()
    # All but the few the stuck receiver claimed were handled by the other one.
    assert len(handled) >= 3 * LIMIT


async def test_every_receiver_refuses_once_the_shared_inbox_is_full(shared: InboxFactory) -> None:
    gate = asyncio.Event()
    filler = receiver(shared(), workers=1)
    other = receiver(shared(), workers=1)
    for node in (filler, other):

        @node.on_completed()
        async def wait(event: ProcessCompleted) -> None:
            await gate.wait()

    async with serve(filler) as fill, serve(other) as client:
        for n in range(LIMIT):
            response = await fill.post(HOOK, data=encode(payload(f"p-{n}")), headers=JSON)
            assert response.status == 200
        # The other receiver stored nothing itself, and still refuses once it has read the
        # inbox's depth anew (its last look predates the filling).
        past_limit: list[int] = []

        async def refused() -> bool:
            response = await client.post(
                HOOK, data=encode(payload(f"late-{len(past_limit)}")), headers=JSON
            )
            if response.status == 200:
                past_limit.append(1)
                return False
            assert response.status == 503
            assert response.headers["Retry-After"] == "5"
            assert await response.json() == {"error": "too many events waiting; retry later"}
            return True

        await eventually(refused, "the other receiver to refuse")
        assert len(past_limit) <= 3  # those that came while its first read ran
        assert other.metrics.unavailable["queue_full"] == 1
        gate.set()

        async def accepted() -> bool:
            retry = await client.post(HOOK, data=encode(payload("p-retry")), headers=JSON)
            return retry.status == 200

        # The sender's retry is accepted once the handlers have drained the inbox.
        await eventually(accepted, "the retried delivery to be accepted")


async def test_a_full_queue_answers_503_until_work_drains() -> None:
    receiver = make_receiver(workers=1, queue_limit=2)
    gate = asyncio.Event()
    seen = Recorder()

    @receiver.on_completed()
    async def gated(event: ProcessCompleted) -> None:
        await gate.wait()
        await seen(event)

    async with serve(receiver) as client:
        for pid in ("p-1", "p-2"):
            response = await client.post(HOOK, data=encode(payload(pid)), headers=JSON)
            assert response.status == 200
        full = await client.post(HOOK, data=encode(payload("p-3")), headers=JSON)
        assert full.status == 503
        assert full.headers["Retry-After"] == "5"
        gate.set()
        await idle(receiver)
        later = await client.post(HOOK, data=encode(payload("p-3")), headers=JSON)
        assert await later.json() == {"status": "accepted"}
        await idle(receiver)
    assert sorted(seen.ids) == ["p-1", "p-2", "p-3"]
    assert receiver.metrics.unavailable["queue_full"] == 1
