"""Keyed runs on a journal: a key is created at most once, whoever asks and however often.

Against the sandbox, in this process; ``tests/reliability/test_keyed_kills.py`` kills a child
process at every step of its runs and restarts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import socket
from pathlib import Path

import pytest

from asyncsdk import (
    BadRequestError,
    ConfigurationError,
    Journal,
    JournalError,
    KeyReusedError,
    ProcessStatus,
    RedisJournal,
    RunStage,
    SQLiteJournal,
    ToolSlug,
    ValidationError,
    WaitTimeoutError,
)
from asyncsdk.samples import path as sample
from asyncsdk.sandbox import Sandbox, SandboxConfig

STAGING = {"space": "bedroom", "style": "modern"}
ROOM = sample("bedroom-empty.jpg")
KITCHEN = sample("kitchen.jpg")


@pytest.fixture
def journal_path(tmp_path: Path) -> Path:
    return tmp_path / "runs.sqlite3"


async def test_a_key_run_again_returns_the_first_process_and_creates_none(
    sandbox: Sandbox, journal_path: Path
) -> None:
    async with sandbox.client(journal=journal_path) as client:
        first = await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="l-42/bed")
        again = await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="l-42/bed")
    # A restarted service: a new client on the same journal file.
    async with sandbox.client(journal=str(journal_path)) as client:
        later = await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="l-42/bed")
    assert first.status == ProcessStatus.DONE
    assert again == first
    assert later == first
    assert sandbox.stats.processes_created == 1
    assert sandbox.stats.orders_created == 1
    assert os.stat(journal_path).st_mode & 0o777 == 0o600  # it names the account's orders


class LosesCancellations:
    """A journal on SQLite whose renewal, once it has renewed, waits and answers even when it
    is cancelled, as a store's driver can on Python 3.11 (redis-py sends each command through
    ``asyncio.wait_for``, which returns the answer when a cancellation lands as it arrives)."""

    def __init__(self, inner: SQLiteJournal) -> None:
        self.inner = inner
        self.lease = inner.lease
        self.claim = inner.claim
        self.advance = inner.advance
        self.release = inner.release
        self.get = inner.get
        self.unfinished = inner.unfinished
        self.close = inner.close

        self.answering = asyncio.Event()

    async def renew(self, key: str, owner: str) -> bool:
        held = await self.inner.renew(key, owner)
        if not self.answering.is_set():  # the answer on its way when the cancellation comes
            with contextlib.suppress(asyncio.CancelledError):
                await self.answering.wait()
        return held


async def test_a_run_ends_though_its_renewal_loses_the_cancellation(journal_path: Path) -> None:
    losing = LosesCancellations(SQLiteJournal(journal_path, lease=0.3))
    journal: Journal = losing
    async with (
        Sandbox(SandboxConfig(processing_delay=0.5)) as sb,
        sb.client(journal=journal) as client,
    ):
        run = asyncio.ensure_future(
            client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="l-7/bed")
        )
        ended, _ = await asyncio.wait({run}, timeout=10)
        if not ended:  # its renewals answer at once again: the next cancellation lands
            losing.answering.set()
            await asyncio.sleep(0.05)
            run.cancel()
            await asyncio.wait({run})
            pytest.fail("the run never returned: its lease was still being renewed")
        process = run.result()
        entry = await journal.get("l-7/bed")
    await journal.close()
    assert process.status == ProcessStatus.DONE
    assert entry is not None
    assert (entry.stage, entry.owner) == (RunStage.FINISHED, "")  # the lease was given up


async def test_other_spellings_of_the_same_widgets_are_the_same_run(
    sandbox: Sandbox, journal_path: Path
) -> None:
    wire = [  # the style first: the order of widgets does not matter either
        {
            "slug": "widget-style-tool-virtual-staging",
            "item_slugs": ["item-modern-widget-style-tool-virtual-staging"],
        },
        {
            "slug": "widget-space-tool-virtual-staging",
            "item_slugs": ["item-bedroom-widget-space-tool-virtual-staging"],
        },
    ]
    async with sandbox.client(journal=journal_path) as client:
        short = await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="k")
        full = await client.run(ToolSlug.VIRTUAL_STAGING, ROOM.read_bytes(), widgets=wire, key="k")
    assert full.id == short.id
    assert sandbox.stats.processes_created == 1


async def test_a_failed_process_is_the_result_of_its_key(
    sandbox: Sandbox, journal_path: Path
) -> None:
    sandbox.config.fail_tools = frozenset({ToolSlug.VIRTUAL_STAGING})
    async with sandbox.client(journal=journal_path) as client:
        failed = await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="k")
        sandbox.config.fail_tools = frozenset()
        again = await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="k")
        retried = await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="k/2")
    assert failed.status == ProcessStatus.FAILED
    assert again == failed
    assert retried.status == ProcessStatus.DONE
    assert sandbox.stats.processes_created == 2


async def test_a_key_given_again_with_other_arguments_raises_and_creates_nothing(
    sandbox: Sandbox, journal_path: Path
) -> None:
    async with sandbox.client(journal=journal_path) as client:
        await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="l-42/bed")
        other_style = {"space": "bedroom", "style": "scandinavian"}
        with pytest.raises(KeyReusedError) as widgets_differ:
            await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=other_style, key="l-42/bed")
        with pytest.raises(KeyReusedError) as photo_differs:
            await client.run(ToolSlug.VIRTUAL_STAGING, KITCHEN, widgets=STAGING, key="l-42/bed")
    assert sandbox.stats.processes_created == 1
    assert sandbox.stats.orders_created == 1
    assert "'l-42/bed'" in str(widgets_differ.value)
    assert "scandinavian" in str(widgets_differ.value)
    assert set(widgets_differ.value.differences) == {"widgets"}
    assert set(photo_differs.value.differences) == {"files"}
    assert photo_differs.value.key == "l-42/bed"


async def test_a_key_without_a_journal_is_refused_before_anything_is_sent(
    sandbox: Sandbox,
) -> None:
    async with sandbox.client() as client:
        with pytest.raises(ConfigurationError, match=r"Client\(journal='runs.sqlite3'\)"):
            await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="k")
        with pytest.raises(ConfigurationError, match="journal"):
            await client.run_mask_removal(ROOM, rectangles=[(1, 1, 9, 9)], key="k")
        with pytest.raises(ConfigurationError, match="journal"):
            await client.resume("k")
    assert sandbox.stats.orders_created == 0


async def test_a_keyed_photo_must_be_a_path_or_bytes(sandbox: Sandbox, journal_path: Path) -> None:
    async with sandbox.client(journal=journal_path) as client:
        stream = io.BytesIO(ROOM.read_bytes())
        with pytest.raises(ValidationError, match="path or bytes"):
            await client.run(ToolSlug.VIRTUAL_STAGING, stream, widgets=STAGING, key="k")
        assert await client.journal.unfinished() == []  # type: ignore[union-attr]
    assert sandbox.stats.orders_created == 0


async def test_two_tasks_with_one_key_create_one_process(
    sandbox: Sandbox, journal_path: Path
) -> None:
    sandbox.config.processing_delay = 0.3
    async with sandbox.client(journal=journal_path) as client:
        runs = [
            client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="same")
            for _ in range(3)
        ]
        processes = await asyncio.gather(*runs)
    assert {process.id for process in processes} == {processes[0].id}
    assert sandbox.stats.processes_created == 1


async def test_a_lost_answer_to_the_creation_adopts_the_process_it_made(
    sandbox: Sandbox, journal_path: Path
) -> None:
    # The service created (and billed) the process, then the connection dropped.
    sandbox.chaos.add(method="POST", path="/v3/process", kind="drop_after")
    async with sandbox.client(journal=journal_path) as client:
        process = await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="k")
        entry = await client.journal.get("k")  # type: ignore[union-attr]
    assert sandbox.stats.chaos_fired
    assert process.status == ProcessStatus.DONE
    assert sandbox.stats.processes_created == 1
    assert entry is not None
    assert entry.stage == RunStage.FINISHED
    assert entry.process_ids == (process.id,)


async def test_an_unfinished_run_is_listed_and_resumed_without_its_photo(
    sandbox: Sandbox, journal_path: Path
) -> None:
    sandbox.config.processing_delay = 1.0
    async with sandbox.client(journal=journal_path) as client:
        with pytest.raises(WaitTimeoutError):
            await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="k", timeout=0.2)
    async with sandbox.client(journal=journal_path) as client:
        assert client.journal is not None
        [entry] = await client.journal.unfinished()
        assert entry.key == "k"
        assert entry.stage == RunStage.CREATED
        assert entry.resumable
        process = await client.resume(entry)
        assert await client.journal.unfinished() == []
    assert process.id == entry.process_ids[0]
    assert process.status == ProcessStatus.DONE
    assert sandbox.stats.processes_created == 1


async def test_a_run_stopped_before_its_upload_is_run_again_with_its_photo(
    sandbox: Sandbox, journal_path: Path
) -> None:
    sandbox.chaos.add(method="POST", path="/v3/order", status=400)
    async with sandbox.client(journal=journal_path) as client:
        assert client.journal is not None
        with pytest.raises(BadRequestError):
            await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="k")
        [entry] = await client.journal.unfinished()
        assert entry.stage == RunStage.INTENT
        assert not entry.resumable
        with pytest.raises(ConfigurationError, match=r"call client\.run\(\) again"):
            await client.resume(entry)
        process = await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="k")
    assert process.status == ProcessStatus.DONE
    assert sandbox.stats.processes_created == 1


async def test_resuming_a_key_the_journal_does_not_hold_names_where_the_keys_are(
    sandbox: Sandbox, journal_path: Path
) -> None:
    async with sandbox.client(journal=journal_path) as client:
        await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="listing-42/bed")
        with pytest.raises(ConfigurationError) as caught:
            await client.resume("listing-42/bedroom")
    message = str(caught.value)
    assert "'listing-42/bedroom'" in message
    assert "client.journal.unfinished()" in message  # where the keys to resume are listed
    assert "client.run()" in message  # how a key never run is started
    assert sandbox.stats.processes_created == 1


async def test_a_keyed_mask_removal_is_created_once(sandbox: Sandbox, journal_path: Path) -> None:
    box = [(100, 100, 300, 300)]
    async with sandbox.client(journal=journal_path) as client:
        first = await client.run_mask_removal(ROOM, rectangles=box, key="mask/1")
        again = await client.run_mask_removal(ROOM, rectangles=box, key="mask/1")
        with pytest.raises(KeyReusedError, match="files"):
            await client.run_mask_removal(ROOM, rectangles=[(0, 0, 50, 50)], key="mask/1")
    assert first.status == ProcessStatus.DONE
    assert again == first
    assert sandbox.stats.processes_created == 1


async def test_a_journal_that_cannot_be_used_raises_before_anything_is_uploaded(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("not a folder\n")
    async with sandbox.client(journal=tmp_path / "a-file" / "runs.sqlite3") as client:
        with pytest.raises(JournalError, match="could not be used"):
            await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="k")
    assert sandbox.stats.orders_created == 0


@pytest.mark.redis
async def test_a_redis_journal_out_of_reach_raises_before_anything_is_uploaded(
    sandbox: Sandbox, redis_url: str
) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    journal = RedisJournal.connect(f"redis://127.0.0.1:{port}/0")
    try:
        async with sandbox.client(journal=journal) as client:
            with pytest.raises(JournalError, match="could not be used"):
                await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="k")
    finally:
        await journal.close()
    assert sandbox.stats.orders_created == 0


async def test_a_journal_object_is_shared_and_left_open_by_the_client(
    sandbox: Sandbox, journal_path: Path
) -> None:
    journal = SQLiteJournal(journal_path, lease=5)
    try:
        async with sandbox.client(journal=journal) as client:
            process = await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="k")
        entry = await journal.get("k")  # still open after the client closed
    finally:
        await journal.close()
    assert entry is not None
    assert entry.process_ids == (process.id,)
