"""The store step of a delivery: one deadline, and a write that nothing interrupts.

A request stops waiting for the store after ``put_timeout`` (503 with ``Retry-After``) or when
its client hangs up, but the write itself goes on: the event is stored once and handled, and the
sender's retry is answered ``duplicate``.  The SQLite inbox is slowed down the way another process
would: by holding the database's write lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st
from whtools import (
    HOOK,
    JSON,
    GatedInbox,
    Recorder,
    SwitchableInbox,
    cancellation_watch,
    encode,
    idle,
    make_receiver,
    payload,
    serve,
    wait_until,
)

from asyncsdk import ProcessCompleted, ResultAsset
from webhooks import SQLiteInbox, WebhookEvent

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "inbox.sqlite3"


@contextlib.contextmanager
def write_lock(db: Path) -> Iterator[Callable[[], None]]:
    """Hold the database's write lock from another connection; the yielded call releases it."""
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")

    def release() -> None:
        if other.in_transaction:
            other.execute("COMMIT")

    try:
        yield release
    finally:
        release()
        other.close()


async def test_a_store_slower_than_put_timeout_answers_503_and_still_stores_once() -> None:
    inbox = GatedInbox()
    receiver = make_receiver(inbox, put_timeout=0.2, retry_after=3)
    seen = Recorder()
    receiver.on_completed()(seen)
    async with serve(receiver) as client:
        slow = await client.post(HOOK, data=encode(payload("p-1")), headers=JSON)
        assert slow.status == 503
        assert slow.headers["Retry-After"] == "3"
        assert "slow" in (await slow.json())["error"]
        inbox.gate.set()  # the write the request gave up on goes through
        await wait_until(lambda: seen.ids == ["p-1"], "the late write to be handled")
        retry = await client.post(HOOK, data=encode(payload("p-1")), headers=JSON)
        assert await retry.json() == {"status": "duplicate"}
    assert receiver.metrics.unavailable["store_slow"] == 1
    assert seen.ids == ["p-1"]


async def test_a_deadline_per_request_each_counted_from_its_own_start() -> None:
    inbox = GatedInbox()
    receiver = make_receiver(inbox, put_timeout=0.2)
    async with serve(receiver) as client:
        first = asyncio.create_task(client.post(HOOK, data=encode(payload("p-1")), headers=JSON))
        async with asyncio.timeout(10):
            await inbox.entered.wait()
        second = await client.post(HOOK, data=encode(payload("p-2")), headers=JSON)
        assert second.status == 503
        assert (await first).status == 503
        inbox.gate.set()
        fast = await client.post(HOOK, data=encode(payload("p-3")), headers=JSON)
        assert await fast.json() == {"status": "accepted"}
        await idle(receiver)
    assert receiver.metrics.unavailable["store_slow"] == 2
    assert receiver.metrics.processed == 3


async def test_sqlite_locked_past_put_timeout_answers_503_then_the_retry_is_a_duplicate(
    db: Path,
) -> None:
    receiver = make_receiver(SQLiteInbox(db), put_timeout=0.3)
    seen = Recorder()
    receiver.on_completed()(seen)
    async with serve(receiver) as client:
        with write_lock(db) as release:
            slow = await client.post(HOOK, data=encode(payload("p-1")), headers=JSON)
            assert slow.status == 503
            assert "Retry-After" in slow.headers
            release()
            await wait_until(
                lambda: seen.ids == ["p-1"], "the queued write to commit and be handled"
            )
            retry = await client.post(HOOK, data=encode(payload("p-1")), headers=JSON)
            assert await retry.json() == {"status": "duplicate"}
        assert seen.ids == ["p-1"]


async def test_sqlite_client_hanging_up_mid_commit_loses_nothing(db: Path) -> None:
    receiver = make_receiver(SQLiteInbox(db))
    seen = Recorder()
    receiver.on_completed()(seen)
    watch, cancelled = cancellation_watch()
    async with serve(receiver, middlewares=[watch]) as client:
        with write_lock(db) as release:
            post = asyncio.create_task(client.post(HOOK, data=encode(payload("p-1")), headers=JSON))
            await wait_until(lambda: receiver.metrics.received == 1, "the delivery to arrive")
            post.cancel()  # the sender gives up while the write waits for the lock
            with pytest.raises(asyncio.CancelledError):
                await post
            async with asyncio.timeout(10):
                await cancelled.wait()
            release()
            await wait_until(lambda: seen.ids == ["p-1"], "the write to commit and be handled")
    assert receiver.metrics.accepted == 0  # nobody was told, and the event is kept all the same


def _done(process_id: str) -> ProcessCompleted:
    return ProcessCompleted(
        event="process.completed",
        process_id=process_id,
        order_id="o-1",
        tool="tool-virtual-staging",
        status="done",
    )


async def test_sqlite_submitted_put_commits_even_when_its_future_is_cancelled(db: Path) -> None:
    inbox = SQLiteInbox(db)
    try:
        event = _done("p-1")
        inbox.submit_put(event, b"raw").cancel()
        assert await inbox.put(event, b"raw") is False  # the cancelled put had stored it
        assert await inbox.pending_count() == 1
    finally:
        await inbox.close()


async def test_sqlite_keeps_the_dedup_key_format_of_existing_files(db: Path) -> None:
    inbox = SQLiteInbox(db)
    events = [
        ProcessCompleted(
            event="process.completed",
            process_id=pid,
            order_id="o-1",
            tool="tool-virtual-staging",
            status=status,
        )
        for pid, status in (("p-1", "done"), ("prozeß-ü", "failed"), ('q"uote\\d', "done"))
    ]
    try:
        for event in events:
            assert await inbox.put(event, b"x")
    finally:
        await inbox.close()
    with contextlib.closing(sqlite3.connect(db)) as conn:  # `with` alone does not close
        keys = [row[0] for row in conn.execute("SELECT dedup_key FROM webhook_inbox ORDER BY id")]
    assert keys == [stored_key(event) for event in events]


async def test_sqlite_close_runs_what_was_queued_first(db: Path) -> None:
    inbox = SQLiteInbox(db)
    event = _done("p-1")
    put = inbox.submit_put(event, b"raw")
    await inbox.close()
    assert put.result() is True
    reopened = SQLiteInbox(db)
    try:
        assert await reopened.pending_count() == 1
    finally:
        await reopened.close()


def stored_key(event: ProcessCompleted) -> str:
    """The dedup key as the inboxes store it: the JSON array (event, process_id, status)."""
    return json.dumps(list(event.dedup_key), separators=(",", ":"), ensure_ascii=False)


async def stored_rows(db: Path, events: list[ProcessCompleted]) -> list[tuple[bytes, str]]:
    """Put ``events`` into a SQLite inbox at ``db``, check they claim back as they went in, and
    return the (event, dedup_key) columns as the file holds them."""
    inbox = SQLiteInbox(db)
    try:
        for event in events:
            assert await inbox.put(event, b"x")
        claimed = await inbox.claim_batch("c", len(events))
        assert [entry.event for entry in claimed] == events
    finally:
        await inbox.close()
    with contextlib.closing(sqlite3.connect(db)) as conn:  # `with` alone does not close
        return [
            (bytes(row[0]), row[1])
            for row in conn.execute("SELECT event, dedup_key FROM webhook_inbox ORDER BY id")
        ]


async def test_the_storage_form_round_trips_and_keeps_its_bytes(db: Path) -> None:
    events = [
        ProcessCompleted(
            event="process.completed",
            process_id="p-1",
            order_id="o-1",
            tool="tool-virtual-staging",
            status="failed",
        ),
        ProcessCompleted(
            event="process.completed",
            process_id='prozeß-ü "q" \\ \u2028',
            order_id="o-ß",
            tool="tool-declutter",
            status="done",
            final_assets=(
                ResultAsset(asset_id="a-1", src="https://x/1.jpg?s=1", thumbnail_src="t"),
                ResultAsset(asset_id="a-2", asset_type="video", asset_role="preview"),
            ),
        ),
    ]
    rows = await stored_rows(db, events)
    # The form files written before hold: compact JSON, field order, non-ASCII kept as is.
    assert rows[0][0] == (
        b'{"event":"process.completed","process_id":"p-1","order_id":"o-1",'
        b'"tool":"tool-virtual-staging","status":"failed","final_assets":[]}'
    )
    assert rows[1][1] == '["process.completed","prozeß-ü \\"q\\" \\\\ \u2028","done"]'


_TEXT = st.text(  # any code point UTF-8 can carry: quotes, backslashes, controls, U+2028
    alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30
)


@settings(max_examples=25, deadline=None)
@given(
    fields=st.lists(_TEXT, min_size=5, max_size=5),
    assets=st.lists(st.lists(_TEXT, min_size=5, max_size=5), max_size=3),
)
def test_any_event_text_is_stored_as_json_and_claimed_back_unchanged(
    tmp_path_factory: pytest.TempPathFactory, fields: list[str], assets: list[list[str]]
) -> None:
    event = ProcessCompleted(
        event=fields[0],
        process_id=fields[1],
        order_id=fields[2],
        tool=fields[3],
        status=fields[4],
        final_assets=tuple(
            ResultAsset(
                asset_id=a[0], src=a[1], thumbnail_src=a[2], asset_type=a[3], asset_role=a[4]
            )
            for a in assets
        ),
    )
    db = tmp_path_factory.mktemp("form") / "inbox.db"
    ((data, key),) = asyncio.run(stored_rows(db, [event]))
    assert json.loads(data)["process_id"] == event.process_id
    assert key == stored_key(event)


async def test_store_unavailable_answers_503_and_loses_nothing() -> None:
    inbox = SwitchableInbox()
    receiver = make_receiver(inbox, retry_after=7)
    seen = Recorder()
    receiver.on_completed()(seen)
    async with serve(receiver) as client:
        inbox.down = True
        response = await client.post(HOOK, data=encode(payload("p-1")), headers=JSON)
        assert response.status == 503
        assert response.headers["Retry-After"] == "7"
        assert "error" in await response.json()
        inbox.down = False
        # The service retries: now accepted, not a duplicate, and handled.
        retry = await client.post(HOOK, data=encode(payload("p-1")), headers=JSON)
        assert await retry.json() == {"status": "accepted"}
        await idle(receiver)
    assert seen.ids == ["p-1"]
    assert receiver.metrics.unavailable["store_unavailable"] == 1


async def test_a_client_hanging_up_mid_persist_loses_nothing_with_handler_cancellation() -> None:
    inbox = GatedInbox()
    receiver = make_receiver(inbox)
    seen = Recorder()
    receiver.on_completed()(seen)
    watch, cancelled = cancellation_watch()
    async with serve(receiver, middlewares=[watch]) as client:
        post = asyncio.create_task(client.post(HOOK, data=encode(payload("p-1")), headers=JSON))
        async with asyncio.timeout(10):
            await inbox.entered.wait()
        post.cancel()  # the sender gives up and closes the connection
        with pytest.raises(asyncio.CancelledError):
            await post
        async with asyncio.timeout(10):
            await cancelled.wait()
        inbox.gate.set()
        await wait_until(lambda: seen.ids == ["p-1"], "the event was stored and handled")


async def test_another_senders_event_keeps_its_storage_bytes(db: Path) -> None:
    event = WebhookEvent(
        id="msg_ü", type="invoice.paid", timestamp=None, data={"n": 1}, raw=b'{"data":{"n":1}}'
    )
    inbox = SQLiteInbox(db)
    try:
        assert await inbox.put(event, event.raw)
        (claimed,) = await inbox.claim_batch("c", 1)
        assert claimed.event == event
    finally:
        await inbox.close()
    with contextlib.closing(sqlite3.connect(db)) as conn:
        ((data, key),) = conn.execute("SELECT event, dedup_key FROM webhook_inbox").fetchall()
    # The form files written before hold: the data is read again from the raw body.
    assert (
        bytes(data) == '{"webhook":{"id":"msg_ü","type":"invoice.paid","timestamp":null}}'.encode()
    )
    assert key == '["webhook","msg_ü"]'
