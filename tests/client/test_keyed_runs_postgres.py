"""Keyed runs on a PostgreSQL journal: two nodes sharing one table create each key once."""

from __future__ import annotations

import asyncio

import pytest

from asyncsdk import KeyReusedError, PostgresJournal, ProcessStatus, RunStage, ToolSlug
from asyncsdk.samples import path as sample
from asyncsdk.sandbox import Sandbox

pytestmark = pytest.mark.postgres

STAGING = {"space": "bedroom", "style": "modern"}
ROOM = sample("bedroom-empty.jpg")
KITCHEN = sample("kitchen.jpg")


async def test_two_nodes_on_one_table_create_each_key_once(
    sandbox: Sandbox, postgres_dsn: str, postgres_schema: str
) -> None:
    sandbox.config.processing_delay = 0.3
    journals = [
        await PostgresJournal.connect(postgres_dsn, schema=postgres_schema) for _ in range(2)
    ]
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
