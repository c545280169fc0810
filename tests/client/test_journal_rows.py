"""A journal's rows are checked before they are believed: a row the library did not write (a
request of another tool, corrupt JSON) raises JournalError, never another run's process.

The rows are edited behind the library's back with each store's own connection (sqlite3, redis,
asyncpg): there is no public way to write a row that lies, which is the point.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from asyncsdk import (
    JournalError,
    KeyReusedError,
    PostgresJournal,
    RedisJournal,
    ToolSlug,
    ValidationError,
    WaitTimeoutError,
)
from asyncsdk.samples import path as sample
from asyncsdk.sandbox import Sandbox

STAGING = {"space": "bedroom", "style": "modern"}
ROOM = sample("bedroom-empty.jpg")


def _lying(request: str) -> str:
    data = json.loads(request)
    data["tool"] = ToolSlug.DAY_TO_DUSK
    return json.dumps(data)


async def _started(sandbox: Sandbox, journal: object, key: str) -> None:
    """A run of ``key`` left at ``created`` (its wait timed out)."""
    sandbox.config.processing_delay = 1.0
    async with sandbox.client(journal=journal) as client:  # type: ignore[arg-type]
        with pytest.raises(WaitTimeoutError):
            await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key=key, timeout=0.2)
    sandbox.config.processing_delay = 0.0


async def test_sqlite_a_request_of_another_tool_is_refused(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    path = tmp_path / "runs.sqlite3"
    async with sandbox.client(journal=path) as client:
        await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="k")
    with sqlite3.connect(path) as db:
        [(request,)] = db.execute("SELECT request FROM asyncsdk_runs").fetchall()
        db.execute("UPDATE asyncsdk_runs SET request = ?", (_lying(request),))
    async with sandbox.client(journal=path) as client:
        with pytest.raises(JournalError, match=r"runs\.sqlite3.*'k'.*delete that row"):
            await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="k")


async def test_sqlite_corrupt_rows_raise_journal_errors(sandbox: Sandbox, tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    async with sandbox.client(journal=path) as client:
        await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="k")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE asyncsdk_runs SET process_ids = '[not json'")
    async with sandbox.client(journal=path) as client:
        with pytest.raises(JournalError, match="'k'"):
            await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="k")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE asyncsdk_runs SET process_ids = '[]', result = '{broken'")
    async with sandbox.client(journal=path) as client:
        with pytest.raises(JournalError, match="'k'"):
            await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="k")


async def test_a_key_with_a_lone_surrogate_is_a_validation_error(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    async with sandbox.client(journal=tmp_path / "runs.sqlite3") as client:
        with pytest.raises(ValidationError, match="surrogate"):
            await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="\ud800")
        with pytest.raises(ValidationError, match="surrogate"):
            await client.resume("\ud800")
    assert sandbox.stats.orders_created == 0


async def test_resume_with_edited_arguments_lists_the_differences(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    path = tmp_path / "runs.sqlite3"
    await _started(sandbox, path, "k")
    async with sandbox.client(journal=path) as client:
        assert client.journal is not None
        [entry] = await client.journal.unfinished()
        edited = json.loads(entry.arguments)
        edited["tool"] = ToolSlug.DAY_TO_DUSK
        other = type(entry)(**{**_fields(entry), "arguments": json.dumps(edited)})
        with pytest.raises(KeyReusedError) as caught:
            await client.resume(other)
    assert set(caught.value.differences) == {"tool"}
    assert caught.value.differences["tool"][1] == ToolSlug.DAY_TO_DUSK


def _fields(entry: object) -> dict[str, object]:
    import attrs

    return attrs.asdict(entry, recurse=False)  # type: ignore[arg-type]


async def test_the_folders_a_journal_creates_are_0700_and_an_existing_one_is_kept(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    (tmp_path / "kept").mkdir(mode=0o755)
    os.chmod(tmp_path / "kept", 0o755)  # noqa: S103  # a folder of the caller's, to be kept
    path = tmp_path / "kept" / "new" / "deeper" / "runs.sqlite3"
    async with sandbox.client(journal=path) as client:
        await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="k")
    assert os.stat(tmp_path / "kept" / "new").st_mode & 0o777 == 0o700
    assert os.stat(path.parent).st_mode & 0o777 == 0o700
    assert os.stat(tmp_path / "kept").st_mode & 0o777 == 0o755


@pytest.mark.redis
async def test_redis_a_request_of_another_tool_is_refused(
    sandbox: Sandbox, redis_url: str, redis_prefix: str, raw_redis: object
) -> None:
    journal = RedisJournal.connect(redis_url, prefix=redis_prefix)
    try:
        async with sandbox.client(journal=journal) as client:
            await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="k")
        name = f"{redis_prefix}run:k"
        request = await raw_redis.hget(name, "request")  # type: ignore[attr-defined]
        await raw_redis.hset(name, "request", _lying(request.decode()))  # type: ignore[attr-defined]
        async with sandbox.client(journal=journal) as client:
            with pytest.raises(JournalError, match=r"RedisJournal.*'k'"):
                await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="k")
        await raw_redis.hset(name, "process_ids", "{")  # type: ignore[attr-defined]
        with pytest.raises(JournalError, match="'k'"):
            await journal.get("k")
    finally:
        await journal.close()


@pytest.mark.postgres
async def test_postgres_a_request_of_another_tool_is_refused(
    sandbox: Sandbox, postgres_dsn: str, postgres_schema: str
) -> None:
    import asyncpg

    journal = await PostgresJournal.connect(postgres_dsn, schema=postgres_schema)
    conn = await asyncpg.connect(postgres_dsn)
    try:
        async with sandbox.client(journal=journal) as client:
            await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="k")
        table = f'"{postgres_schema}".runs'
        request = await conn.fetchval(f"SELECT request FROM {table} WHERE key = 'k'")
        await conn.execute(f"UPDATE {table} SET request = $1", _lying(request))
        async with sandbox.client(journal=journal) as client:
            with pytest.raises(JournalError, match=r"PostgresJournal.*'k'"):
                await client.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key="k")
        await conn.execute(f"UPDATE {table} SET process_ids = '[1'")
        with pytest.raises(JournalError, match="'k'"):
            await journal.get("k")
    finally:
        await conn.close()
        await journal.close()
