"""Keyed runs on a shared journal: two nodes on one PostgreSQL table, or on one Redis prefix,
create each key once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from asyncsdk import (
    Journal,
    KeyReusedError,
    PostgresJournal,
    ProcessStatus,
    RedisJournal,
    RunStage,
    ToolSlug,
)
from asyncsdk.samples import path as sample
from asyncsdk.sandbox import Sandbox

STAGING = {"space": "bedroom", "style": "modern"}
ROOM = sample("bedroom-empty.jpg")
KITCHEN = sample("kitchen.jpg")


@pytest.fixture(
    params=[
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("postgres-pgbouncer-transaction", marks=pytest.mark.postgres),
        pytest.param("postgres-pgbouncer-session", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ]
)
def open_node(request: pytest.FixtureRequest) -> Callable[[], Awaitable[Journal]]:
    """Opens the journal of one more node: all on one PostgreSQL schema (directly or through
    PgBouncer in each pool mode), or one Redis prefix."""
    if str(request.param).startswith("postgres"):
        dsn = request.getfixturevalue("postgres_dsn")
        mode = str(request.param).partition("-pgbouncer-")[2]
        if mode:
            dsn = request.getfixturevalue("through_pgbouncer")(mode)
        schema = request.getfixturevalue("postgres_schema")

        async def postgres() -> Journal:
            return await PostgresJournal.connect(dsn, schema=schema)

        return postgres
    url = request.getfixturevalue("redis_url")
    prefix = request.getfixturevalue("redis_prefix")

    async def redis() -> Journal:
        return RedisJournal.connect(url, prefix=prefix)

    return redis


async def test_two_nodes_on_one_journal_create_each_key_once(
    sandbox: Sandbox, open_node: Callable[[], Awaitable[Journal]]
) -> None:
    sandbox.config.processing_delay = 0.3
    journals = [await open_node() for _ in range(2)]
    keys = [f"listing-{n}/bedroom" for n in range(3)]
    try:
        async with (
            sandbox.client(journal=journals[0]) as one,
            sandbox.client(journal=journals[1]) as two,
        ):
            runs = [
                node.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key=key)
                for key in keys
                for node in (one, two)
            ]
            processes = await asyncio.gather(*runs)
            assert sandbox.stats.processes_created == len(keys)
            replayed = [
                await two.run(ToolSlug.VIRTUAL_STAGING, ROOM, widgets=STAGING, key=key)
                for key in keys
            ]
            with pytest.raises(KeyReusedError, match="listing-0/bedroom"):
                await one.run(ToolSlug.VIRTUAL_STAGING, KITCHEN, widgets=STAGING, key=keys[0])
        entries = [await journals[1].get(key) for key in keys]
        assert await journals[0].unfinished() == []
    finally:
        for journal in journals:
            await journal.close()
    by_key = {key: {p.id for p in processes[2 * n : 2 * n + 2]} for n, key in enumerate(keys)}
    assert all(len(ids) == 1 for ids in by_key.values())  # both nodes got the one process
    assert [p.id for p in replayed] == [ids.pop() for ids in by_key.values()]
    assert all(p.status == ProcessStatus.DONE for p in processes)
    assert [e.stage if e else None for e in entries] == [RunStage.FINISHED] * len(keys)
    assert sandbox.stats.processes_created == len(keys)
