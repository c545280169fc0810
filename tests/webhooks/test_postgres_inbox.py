"""PostgresInbox keeps the inbox contract on a real PostgreSQL, and what a shared inbox must do."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator

import asyncpg
import pytest
from inbox_contract import (
    CLAIM_TIMEOUT,
    ClaimingInboxContract,
    OpenInbox,
    SharedInboxContract,
    event,
)

from asyncsdk import ConfigurationError
from webhooks import (
    Inbox,
    InboxError,
    InboxUnavailableError,
    PostgresInbox,
)

pytestmark = pytest.mark.postgres


class TestPostgresInbox(ClaimingInboxContract):
    """The contract, directly and through PgBouncer in each pool mode (``store_dsn``)."""

    @pytest.fixture
    async def inbox(self, store_dsn: str, postgres_schema: str) -> AsyncIterator[Inbox]:
        inbox = PostgresInbox(store_dsn, schema=postgres_schema, claim_timeout=CLAIM_TIMEOUT)
        yield inbox
        await inbox.close()


class TestSharedPostgresInbox(SharedInboxContract):
    @pytest.fixture
    async def open_inbox(self, store_dsn: str, postgres_schema: str) -> AsyncIterator[OpenInbox]:
        opened: list[PostgresInbox] = []

        def open_inbox() -> PostgresInbox:
            opened.append(
                PostgresInbox(store_dsn, schema=postgres_schema, claim_timeout=CLAIM_TIMEOUT)
            )
            return opened[-1]

        yield open_inbox
        for inbox in opened:
            await inbox.close()


@pytest.fixture
async def raw_postgres(postgres_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    """A plain connection to the test database, to look at the rows behind the inbox."""
    conn = await asyncpg.connect(postgres_dsn)
    yield conn
    await conn.close()


async def test_puts_queued_before_close_are_committed(
    postgres_dsn: str, postgres_schema: str
) -> None:
    inbox = PostgresInbox(postgres_dsn, schema=postgres_schema)
    await inbox.check()
    answers = [inbox.submit_put(event(f"p-{n}"), b"x") for n in range(3)]
    await inbox.close()
    assert [await answer for answer in answers] == [True, True, True]
    again = PostgresInbox(postgres_dsn, schema=postgres_schema)
    try:
        assert await again.pending_count() == 3
    finally:
        await again.close()


async def test_concurrent_consumers_take_disjoint_batches(
    postgres_dsn: str, postgres_schema: str
) -> None:
    inboxes = [PostgresInbox(postgres_dsn, schema=postgres_schema) for _ in range(3)]
    try:
        for n in range(60):
            await inboxes[0].put(event(f"p-{n}"), b"x")
        batches = await asyncio.gather(
            *(ib.claim_batch(f"host-{i}-{k}", 7) for k in range(4) for i, ib in enumerate(inboxes))
        )
        ids = [entry.id for batch in batches for entry in batch]
        assert len(ids) == len(set(ids)) == 60  # every entry once, none to two consumers
    finally:
        for ib in inboxes:
            await ib.close()


async def test_acked_rows_keep_only_the_key_until_the_retention_ends(
    postgres_dsn: str, postgres_schema: str, raw_postgres: asyncpg.Connection
) -> None:
    inbox = PostgresInbox(postgres_dsn, schema=postgres_schema, retention=0.5)
    try:
        await inbox.put(event("p-1"), b"a large body" * 100)
        (entry,) = await inbox.claim_batch("c1", 10)
        await inbox.ack(entry.id)
        row = await raw_postgres.fetchrow(
            f'SELECT state, length(event) + length(raw) AS size FROM "{postgres_schema}".inbox'
        )
        assert (row["state"], row["size"]) == ("done", 0)
        assert await inbox.put(event("p-1"), b"again") is False
        await asyncio.sleep(0.6)
        assert await inbox.put(event("p-1"), b"again") is True  # the sender's retry horizon passed
        (again,) = await inbox.claim_batch("c1", 10)
        assert (again.raw, again.attempts) == (b"again", 1)
    finally:
        await inbox.close()


async def test_a_failed_put_claims_no_key_for_any_put_made_with_it(
    postgres_dsn: str, postgres_schema: str, raw_postgres: asyncpg.Connection
) -> None:
    inbox = PostgresInbox(postgres_dsn, schema=postgres_schema)
    try:
        await inbox.check()  # creates the table
        # A rule of the database's own that one body breaks: the puts made with it share its fate.
        await raw_postgres.execute(
            f'ALTER TABLE "{postgres_schema}".inbox ADD CONSTRAINT small CHECK (length(raw) < 10)'
        )
        puts = [inbox.put(event(f"p-{n}"), b"x") for n in range(5)]
        puts.append(inbox.put(event("p-big"), b"far too long"))
        results = await asyncio.gather(*puts, return_exceptions=True)
        assert all(isinstance(r, InboxError) and "small" in str(r) for r in results), results
        assert await inbox.pending_count() == 0
        # Every sender's retry is accepted once the cause is gone.
        await raw_postgres.execute(f'ALTER TABLE "{postgres_schema}".inbox DROP CONSTRAINT small')
        again = [inbox.put(event(f"p-{n}"), b"x") for n in range(5)]
        assert await asyncio.gather(*again) == [True] * 5
    finally:
        await inbox.close()


async def test_schemas_are_separate_inboxes(postgres_dsn: str, postgres_schema: str) -> None:
    first = PostgresInbox(postgres_dsn, schema=postgres_schema)
    other_schema = postgres_schema + "_other"
    other = PostgresInbox(postgres_dsn, schema=other_schema)
    try:
        await first.put(event("p-1"), b"one")
        assert await other.pending_count() == 0
        assert await other.put(event("p-1"), b"one") is True
    finally:
        await first.close()
        await other.close()
        conn = await asyncpg.connect(postgres_dsn)
        try:
            await conn.execute(f'DROP SCHEMA "{other_schema}" CASCADE')
        finally:
            await conn.close()


async def test_unreachable_server_is_inbox_unavailable() -> None:
    inbox = PostgresInbox("postgresql://postgres@127.0.0.1:1/test")
    try:
        with pytest.raises(InboxUnavailableError, match=r"127\.0\.0\.1:1/test cannot be reached"):
            await inbox.put(event(), b"x")
        with pytest.raises(InboxUnavailableError):
            await inbox.check()
    finally:
        await inbox.close()


def test_bad_options_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="postgresql://"):
        PostgresInbox("redis://127.0.0.1:6379")
    for schema in ("", "Webhooks", "web-hooks", "1st", "x" * 49, 'a"b'):
        with pytest.raises(ConfigurationError, match="schema must be a lower-case name"):
            PostgresInbox("postgresql://127.0.0.1/db", schema=schema)
    with pytest.raises(ConfigurationError, match="claim_timeout must be more than 0"):
        PostgresInbox("postgresql://127.0.0.1/db", claim_timeout=0)


def test_the_password_stays_out_of_the_repr() -> None:
    inbox = PostgresInbox("postgresql://app:s3cret@db.internal:6543/app", schema="hooks")
    assert repr(inbox) == "PostgresInbox('db.internal:6543/app', schema='hooks')"


def test_importing_webhooks_does_not_import_asyncpg() -> None:
    code = "import sys, webhooks; print('asyncpg' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"


def test_the_postgres_backends_name_the_extra_when_asyncpg_is_missing() -> None:
    # A fresh interpreter in which "import asyncpg" fails, as in an install without the extra.
    code = (
        "import sys; sys.modules['asyncpg'] = None\n"
        "import webhooks\n"
        "from asyncsdk import ConfigurationError\n"
        "for backend in (webhooks.PostgresInbox, webhooks.PostgresRegistry):\n"
        "    try:\n"
        "        backend('postgresql://127.0.0.1/db')\n"
        "    except ConfigurationError as exc:\n"
        "        print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.count("pip install 'asyncsdk[postgres]'") == 2


async def test_the_inbox_table_is_vacuumed_by_dead_rows_not_by_size(
    postgres_dsn: str, postgres_schema: str, raw_postgres: asyncpg.Connection
) -> None:
    # Claims read the index of pending rows from its oldest end: with PostgreSQL's default (20 %
    # of the table) a million retained keys would let 200,000 dead versions pile up there.
    inbox = PostgresInbox(postgres_dsn, schema=postgres_schema)
    try:
        await inbox.check()
    finally:
        await inbox.close()
    options = await raw_postgres.fetchval(
        "SELECT reloptions FROM pg_class"
        " WHERE relname = 'inbox' AND relnamespace = $1::regnamespace",
        postgres_schema,
    )
    assert "autovacuum_vacuum_scale_factor=0" in options
    assert "autovacuum_vacuum_threshold=10000" in options
