"""``atomic=True`` handlers on PostgreSQL: their writes commit in the transaction of the ack.

The inbox runs a handler's queued statements and functions in the transaction that acks the
entry, and only while the worker still holds it; a process that dies between its handler and its
ack leaves no effect behind, and the process that takes the entry over commits them once.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest
from inbox_contract import CLAIM_TIMEOUT, claim_eventually, event
from node_process import start_node_process
from whtools import HOOK, JSON, encode, idle, serve
from whtools import payload as hook_payload

from asyncsdk import ConfigurationError, ProcessCompleted
from webhooks import (
    InboxError,
    PostgresInbox,
    PostgresWrites,
    RedisWrites,
    TokenVerifier,
    WebhookReceiver,
)
from webhooks.contract import AtomicInbox

pytestmark = pytest.mark.postgres

NODE_SCRIPT = Path(__file__).with_name("postgres_node.py")
TOKEN = "pg-" + "k3y5" * 8


@pytest.fixture
async def raw_postgres(
    postgres_dsn: str, postgres_schema: str
) -> AsyncIterator[asyncpg.Connection]:
    """A plain connection, with the test's schema and its ``effects`` and ``runs`` tables."""
    conn = await asyncpg.connect(postgres_dsn)
    await conn.execute(
        f'CREATE SCHEMA "{postgres_schema}";'
        f' CREATE TABLE "{postgres_schema}".effects (process_id text PRIMARY KEY, n int NOT NULL);'
        f' CREATE TABLE "{postgres_schema}".runs (process_id text PRIMARY KEY, n int NOT NULL)'
    )
    yield conn
    await conn.close()


@pytest.fixture
async def inbox(
    store_dsn: str, postgres_schema: str, raw_postgres: asyncpg.Connection
) -> AsyncIterator[PostgresInbox]:
    """The inbox, directly and through PgBouncer in each pool mode."""
    inbox = PostgresInbox(store_dsn, schema=postgres_schema, claim_timeout=CLAIM_TIMEOUT)
    yield inbox
    await inbox.close()


def counting(schema: str, process_id: str) -> PostgresWrites:
    writes = PostgresWrites()
    writes.execute(
        f'INSERT INTO "{schema}".effects VALUES ($1, 1)'
        " ON CONFLICT (process_id) DO UPDATE SET n = effects.n + 1",
        process_id,
    )
    return writes


async def effects(raw: asyncpg.Connection, schema: str) -> dict[str, int]:
    rows = await raw.fetch(f'SELECT process_id, n FROM "{schema}".effects')
    return {row["process_id"]: row["n"] for row in rows}


async def test_postgres_inbox_commits_writes_with_the_ack(
    inbox: PostgresInbox, raw_postgres: asyncpg.Connection, postgres_schema: str
) -> None:
    assert isinstance(inbox, AtomicInbox)
    await inbox.put(event("p-1"), b"raw")
    [entry] = await inbox.claim_batch("c1", 10)
    first, second = counting(postgres_schema, "p-1"), inbox.new_writes()
    seen: list[object] = []

    @second.run
    async def read_then_write(conn: asyncpg.Connection) -> None:
        # Inside the ack's transaction: the first buffer's row is visible, the ack is not yet.
        seen.append(await conn.fetchval(f'SELECT n FROM "{postgres_schema}".effects'))
        seen.append(
            await conn.fetchval(
                f'SELECT state FROM "{postgres_schema}".inbox WHERE id = {entry.id}'
            )
        )
        await conn.execute(f'INSERT INTO "{postgres_schema}".effects VALUES ($1, 10)', "p-1:total")

    assert len(first) == len(second) == 1
    assert await inbox.ack_with(entry.id, "c1", [first, second]) is True
    assert seen == [1, "pending"]
    assert await effects(raw_postgres, postgres_schema) == {"p-1": 1, "p-1:total": 10}
    assert await inbox.pending_count() == 0
    # Finished: a second commit of the same entry changes nothing, and the dedup key stays.
    assert await inbox.ack_with(entry.id, "c1", [counting(postgres_schema, "p-1")]) is False
    assert (await effects(raw_postgres, postgres_schema))["p-1"] == 1
    assert await inbox.put(event("p-1"), b"again") is False


async def test_a_consumer_that_lost_its_claim_writes_nothing(
    inbox: PostgresInbox, raw_postgres: asyncpg.Connection, postgres_schema: str
) -> None:
    await inbox.put(event("p-1"), b"raw")
    [stale] = await inbox.claim_batch("slow", 10)
    # "slow" never renews its claim: after claim_timeout another consumer takes the entry over.
    [taken] = await claim_eventually(inbox, "fresh")
    assert taken.id == stale.id
    assert await inbox.ack_with(stale.id, "slow", [counting(postgres_schema, "p-1")]) is False
    assert await effects(raw_postgres, postgres_schema) == {}
    assert await inbox.ack_with(taken.id, "fresh", [counting(postgres_schema, "p-1")]) is True
    assert await effects(raw_postgres, postgres_schema) == {"p-1": 1}


async def test_a_failing_write_rolls_back_the_writes_and_the_ack(
    inbox: PostgresInbox, raw_postgres: asyncpg.Connection, postgres_schema: str
) -> None:
    await inbox.put(event("p-1"), b"raw")
    [entry] = await inbox.claim_batch("c1", 10)
    failing = counting(postgres_schema, "p-1")
    failing.execute(f'INSERT INTO "{postgres_schema}".effects VALUES (NULL, 1)')
    with pytest.raises(InboxError, match="null value in column"):
        await inbox.ack_with(entry.id, "c1", [failing])
    assert await effects(raw_postgres, postgres_schema) == {}
    assert await inbox.pending_count() == 1
    # The claim is still held, then lapses: the entry is handed out again.
    [again] = await claim_eventually(inbox, "c2")
    assert (again.id, again.attempts) == (entry.id, 2)


async def test_an_entry_with_no_writes_is_acked_like_ack(inbox: PostgresInbox) -> None:
    await inbox.put(event("p-1"), b"raw")
    [entry] = await inbox.claim_batch("c1", 10)
    assert await inbox.ack_with(entry.id, "c1", []) is True
    assert await inbox.pending_count() == 0
    assert await inbox.claim_batch("c1", 10) == []
    assert await inbox.ack_with("not-an-id", "c1", []) is False


async def test_writes_take_sql_text_and_functions_only(inbox: PostgresInbox) -> None:
    writes = inbox.new_writes()
    for bad in (None, "", "  ", b"SELECT 1"):
        with pytest.raises(ConfigurationError, match="non-empty str"):
            writes.execute(bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="async function"):
        writes.run("SELECT 1")  # type: ignore[arg-type]
    assert len(writes) == 0
    with pytest.raises(ConfigurationError, match="PostgresWrites"):
        await inbox.ack_with("1", "c1", [RedisWrites()])  # type: ignore[list-item]


async def test_writes_of_a_retried_entry_are_committed_once(
    inbox: PostgresInbox, raw_postgres: asyncpg.Connection, postgres_schema: str
) -> None:
    """A plain handler fails once: the atomic one runs twice, its writes commit once."""
    receiver = WebhookReceiver(
        inbox=inbox,
        verifier=TokenVerifier(HOOK.rsplit("/", 1)[1]),
        retry_base=0.01,
        poll_interval=0.05,
    )
    runs: list[str] = []
    failures = [RuntimeError("downstream unavailable")]

    @receiver.on_completed(atomic=True)
    async def count(event: ProcessCompleted, writes: PostgresWrites) -> None:
        runs.append(event.process_id)
        writes.execute(
            f'INSERT INTO "{postgres_schema}".effects VALUES ($1, 1)'
            " ON CONFLICT (process_id) DO UPDATE SET n = effects.n + 1",
            event.process_id,
        )

    @receiver.on_completed()
    async def flaky(event: ProcessCompleted) -> None:
        if failures:
            raise failures.pop()

    async with serve(receiver) as client:
        for _ in range(3):  # the service's duplicates
            response = await client.post(HOOK, data=encode(hook_payload("proc-1")), headers=JSON)
            assert response.status == 200
        await idle(receiver)
    assert runs == ["proc-1", "proc-1"]
    assert await effects(raw_postgres, postgres_schema) == {"proc-1": 1}
    assert receiver.metrics.processed == 1
    assert receiver.metrics.retried == 1


async def start_node(dsn: str, schema: str, name: str, mode: str) -> tuple[Any, str]:
    process, port = await start_node_process(NODE_SCRIPT, dsn, schema, TOKEN, name, mode, name=name)
    return process, f"http://127.0.0.1:{port}/hooks/{TOKEN}"


@pytest.mark.slow
async def test_a_process_killed_between_handler_and_ack_leaves_one_effect(
    postgres_dsn: str, postgres_schema: str, raw_postgres: asyncpg.Connection
) -> None:
    """SIGKILL after the handler queued its writes: the entry goes to another process, whose run
    commits the writes; the killed run committed none."""
    delivery = hook_payload("proc-k")
    doomed, doomed_url = await start_node(postgres_dsn, postgres_schema, "doomed", "atomic-die")
    async with aiohttp.ClientSession() as session:
        async with session.post(doomed_url, json=delivery) as response:
            assert response.status == 200  # stored before the answer
        async with asyncio.timeout(30):  # a guard against a hang only
            await doomed.communicate()
        assert doomed.returncode == -signal.SIGKILL  # the handler killed its own process
        runs = f'SELECT n FROM "{postgres_schema}".runs'
        assert await raw_postgres.fetchval(runs) == 1
        assert await effects(raw_postgres, postgres_schema) == {}

        heir, heir_url = await start_node(postgres_dsn, postgres_schema, "heir", "atomic")
        try:
            pending = f"SELECT count(*) FROM \"{postgres_schema}\".inbox WHERE state = 'pending'"
            async with asyncio.timeout(30):  # a guard against a hang only
                while await raw_postgres.fetchval(pending):  # noqa: ASYNC110 - state is in the db
                    await asyncio.sleep(0.05)
            # A duplicate delivery afterwards is refused by the dedup key, not handled again.
            async with session.post(heir_url, json=delivery) as response:
                assert response.status == 200
                assert (await response.json())["status"] == "duplicate"
        finally:
            heir.send_signal(signal.SIGTERM)
            await heir.communicate()
    assert await raw_postgres.fetchval(runs) == 2
    assert await effects(raw_postgres, postgres_schema) == {"proc-k": 1}


async def test_what_a_handler_sets_on_its_connection_does_not_outlive_its_ack(
    inbox: PostgresInbox,
) -> None:
    # The pool hands connections out again without asyncpg's reset; the inbox resets the one a
    # handler's functions ran on.  Later users of that same connection see none of its settings.
    async def ack_running(process_id: str, run: Any) -> None:
        await inbox.put(event(process_id), b"raw")
        [entry] = await inbox.claim_batch("c1", 10)
        writes = inbox.new_writes()
        writes.run(run)
        assert await inbox.ack_with(entry.id, "c1", [writes]) is True

    leaked: list[int] = []

    async def leak(conn: asyncpg.Connection) -> None:
        await conn.execute("SET application_name = 'left-by-a-handler'")
        await conn.execute("SET SESSION statement_timeout = '12345s'")
        leaked.append(await conn.fetchval("SELECT pg_backend_pid()"))

    await ack_running("p-leak", leak)
    seen: list[tuple[int, str, str]] = []

    async def look(conn: asyncpg.Connection) -> None:
        seen.append(
            (
                await conn.fetchval("SELECT pg_backend_pid()"),
                await conn.fetchval("SELECT current_setting('application_name')"),
                await conn.fetchval("SELECT current_setting('statement_timeout')"),
            )
        )

    for n in range(24):  # the pool cycles through its connections: one of these is the leaker's
        await ack_running(f"p-{n}", look)
        if seen[-1][0] == leaked[0]:
            break
    reused = [s for s in seen if s[0] == leaked[0]]
    assert reused, "the handler's connection was never handed out again"
    assert all(name != "left-by-a-handler" and timeout == "0" for _, name, timeout in reused)
