"""Both bundled inboxes keep the contract; the SQLite one also survives a reopen."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from inbox_contract import (
    CLAIM_TIMEOUT,
    ClaimingInboxContract,
    OpenInbox,
    SharedInboxContract,
    claim_eventually,
    event,
)

from webhooks import Inbox, InboxUnavailableError, MemoryInbox, SQLiteInbox


class TestMemoryInbox(ClaimingInboxContract):
    @pytest.fixture
    async def inbox(self) -> AsyncIterator[Inbox]:
        inbox = MemoryInbox(claim_timeout=CLAIM_TIMEOUT)
        yield inbox
        await inbox.close()


class TestSQLiteInbox(ClaimingInboxContract):
    @pytest.fixture
    async def inbox(self, tmp_path: Path) -> AsyncIterator[Inbox]:
        inbox = SQLiteInbox(tmp_path / "inbox.sqlite3", claim_timeout=CLAIM_TIMEOUT)
        yield inbox
        await inbox.close()


class TestSharedSQLiteInbox(SharedInboxContract):
    """Processes of one host sharing one database file."""

    @pytest.fixture
    async def open_inbox(self, tmp_path: Path) -> AsyncIterator[OpenInbox]:
        opened: list[SQLiteInbox] = []

        def open_inbox() -> SQLiteInbox:
            opened.append(SQLiteInbox(tmp_path / "inbox.sqlite3", claim_timeout=CLAIM_TIMEOUT))
            return opened[-1]

        yield open_inbox
        for inbox in opened:
            await inbox.close()


async def test_a_long_memory_backlog_hands_out_every_event_as_stored() -> None:
    # Thousands waiting: each is handed out in order, with its event and raw body as stored.
    inbox = MemoryInbox()
    events = [
        event(f"p-{n}", status="done" if n % 3 else "failed", src=f"https://x/{n}.jpg?é")
        for n in range(5000)
    ]
    for item in events:
        assert await inbox.put(item, item.process_id.encode())
    claimed = await inbox.claim_batch("c1", 6000)
    assert [entry.event for entry in claimed] == events
    assert [entry.raw for entry in claimed] == [e.process_id.encode() for e in events]
    await inbox.dead_letter(claimed[-1].id, "parked")
    assert [d.event for d in await inbox.dead_letters()] == [events[-1]]


async def test_a_long_memory_backlog_keeps_an_event_utf8_cannot_encode() -> None:
    # JSON can carry a lone surrogate ("\ud800") that UTF-8 cannot; the memory inbox keeps the
    # event as it came, however long its backlog, and never claims the key without the entry.
    inbox = MemoryInbox()
    for n in range(4096):
        assert await inbox.put(event(f"p-{n}"), b"x")
    odd = event("p-\ud800-odd")
    assert await inbox.put(odd, b"odd")
    assert await inbox.put(odd, b"odd") is False
    claimed = await inbox.claim_batch("c1", 5000)
    assert claimed[-1].event == odd


async def test_sqlite_entries_survive_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "inbox.sqlite3"
    first = SQLiteInbox(path, claim_timeout=CLAIM_TIMEOUT)
    assert await first.put(event("p-1"), b"one")
    assert await first.put(event("p-2"), b"two")
    (claimed, _) = await first.claim_batch("before-restart", 2)
    await first.ack(claimed.id)
    await first.close()

    second = SQLiteInbox(path, claim_timeout=CLAIM_TIMEOUT)
    try:
        assert await second.put(event("p-1"), b"one") is False  # acked key still held
        assert await second.put(event("p-2"), b"two") is False  # pending key still held
        assert await second.pending_count() == 1
        # p-2 was claimed by the process that went away: handed out after the claim times out.
        batch = await claim_eventually(second, "after-restart")
        assert [e.event for e in batch] == [event("p-2")]
        assert batch[0].raw == b"two"
    finally:
        await second.close()


async def test_sqlite_groups_concurrent_puts_and_each_put_sees_its_own_answer(
    tmp_path: Path,
) -> None:
    inbox = SQLiteInbox(tmp_path / "inbox.sqlite3", batch_window=0.005)
    try:
        events = [event(f"p-{n % 100}") for n in range(300)]
        results = await asyncio.gather(*(inbox.put(e, b"x") for e in events))
        assert results[:100] == [True] * 100
        assert results[100:] == [False] * 200
        assert await inbox.pending_count() == 100
    finally:
        await inbox.close()


async def test_two_sqlite_inboxes_on_one_file_share_dedup_and_claims(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    one, two = SQLiteInbox(path), SQLiteInbox(path)
    try:
        results = await asyncio.gather(*(ib.put(event(), b"x") for ib in (one, two) * 10))
        assert results.count(True) == 1
        assert len(await one.claim_batch("a", 10)) == 1
        assert await two.claim_batch("b", 10) == []
    finally:
        await one.close()
        await two.close()


async def test_a_claim_hands_out_the_latest_delivery_stored_under_a_reused_key(
    tmp_path: Path,
) -> None:
    # One inbox stores a delivery; another process claims and finishes it, and once its key is
    # past retention stores a later delivery of that key in the same row.  The first inbox must
    # hand out the later one, not the event it remembers storing.
    path = tmp_path / "shared.sqlite3"
    one = SQLiteInbox(path, dedup_retention=0.05)
    two = SQLiteInbox(path, dedup_retention=0.05)
    try:
        assert await one.put(event(src="first-signed-url"), b"first")
        (entry,) = await two.claim_batch("b", 10)
        await two.ack(entry.id)
        await asyncio.sleep(0.1)
        assert await two.put(event(src="second-signed-url"), b"second")
        (again,) = await one.claim_batch("a", 10)
        assert again.id == entry.id
        assert again.raw == b"second"
        assert again.event.final_assets[0].src == "second-signed-url"
    finally:
        await one.close()
        await two.close()


async def test_sqlite_on_an_unwritable_path_raises_unavailable(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    inbox = SQLiteInbox(blocker / "inbox.sqlite3")
    try:
        with pytest.raises(InboxUnavailableError, match="SQLite inbox"):
            await inbox.put(event(), b"x")
        with pytest.raises(InboxUnavailableError):
            await inbox.check()
    finally:
        await inbox.close()
