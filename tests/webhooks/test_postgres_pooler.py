"""PostgreSQL through PgBouncer: what the DSN's ``pooler=`` changes, and what goes wrong without.

Each test starts the PgBouncer it needs (``through_pgbouncer``) in front of the shared server.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest
from whtools import HOOK, JSON, TOKEN, encode, idle, payload, serve, wait_until

from asyncsdk import ConfigurationError, ProcessCompleted
from webhooks import PostgresInbox, PostgresRegistry, TokenVerifier, WebhookReceiver

pytestmark = pytest.mark.postgres

EVENTS = 20


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "webhooks.postgres"]


async def test_a_receiver_through_a_transaction_pooler_handles_each_event_once(
    through_pgbouncer: Callable[[str], str],
    postgres_schema: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="webhooks.postgres")
    dsn = through_pgbouncer("transaction")
    receiver = WebhookReceiver.from_postgres(
        dsn, verifier=TokenVerifier(TOKEN), schema=postgres_schema, poll_interval=0.05
    )
    handled: list[str] = []

    @receiver.on_completed()
    async def record(event: ProcessCompleted) -> None:
        handled.append(event.process_id)

    waiter = PostgresRegistry(dsn, schema=postgres_schema, poll_interval=0.1)
    try:
        async with serve(receiver) as client:
            waiting = asyncio.create_task(waiter.wait("p-0", timeout=10))
            for n in range(EVENTS):
                response = await client.post(HOOK, data=encode(payload(f"p-{n}")), headers=JSON)
                assert response.status == 200
            assert (await waiting).process_id == "p-0"
            await wait_until(lambda: len(handled) >= EVENTS, "every event to be handled")
            await idle(receiver)
    finally:
        await waiter.close()
    assert sorted(handled) == sorted(f"p-{n}" for n in range(EVENTS))
    lines = said(caplog)
    where = dsn.partition("@")[2].partition("?")[0]
    assert (
        f"inbox on PostgreSQL at {where}, schema {postgres_schema}: through a transaction pooler"
        in lines
    )
    assert (
        f"registry on PostgreSQL at {where}, schema {postgres_schema}:"
        " through a transaction pooler, polling every 0.1 s"
    ) in lines


async def test_a_registry_given_a_listen_dsn_listens_there_and_says_so(
    through_pgbouncer: Callable[[str], str],
    postgres_dsn: str,
    postgres_schema: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="webhooks.postgres")
    registry = PostgresRegistry(
        through_pgbouncer("transaction"), schema=postgres_schema, listen_dsn=postgres_dsn
    )
    try:
        await registry.start()
        assert not registry.polls
    finally:
        await registry.close()
    direct = postgres_dsn.partition("@")[2]
    assert any(
        line.endswith(f"through a transaction pooler, listening on {direct}")
        for line in said(caplog)
    )


async def test_without_pooler_in_the_dsn_a_lost_statement_names_the_option(
    through_pgbouncer: Callable[[str], str],
    postgres_schema: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Through a transaction pooler, asyncpg's cached statements live on whichever server
    # connection prepared them; the next transaction of the same client gets another one.
    unsaid = through_pgbouncer("transaction").partition("?")[0]
    inbox = PostgresInbox(unsaid, schema=postgres_schema)

    async def busy() -> None:
        for _ in range(50):
            await asyncio.gather(*(inbox.pending_count() for _ in range(16)))

    try:
        with pytest.raises(ConfigurationError, match=r"add \?pooler=transaction to the DSN"):
            await busy()
    finally:
        await inbox.close()
    # At the first use already, a warning says something is between.
    [warning] = [record for record in caplog.records if record.levelno == logging.WARNING]
    assert "a pooler or proxy is between" in warning.getMessage()
    assert "add ?pooler=transaction to the DSN" in warning.getMessage()


async def test_a_direct_connection_or_a_named_pooler_warns_of_nothing(
    postgres_dsn: str,
    through_pgbouncer: Callable[[str], str],
    postgres_schema: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for dsn in (postgres_dsn, through_pgbouncer("transaction"), through_pgbouncer("session")):
        inbox = PostgresInbox(dsn, schema=postgres_schema)
        try:
            await inbox.check()
        finally:
            await inbox.close()
    assert not [record for record in caplog.records if record.levelno >= logging.WARNING]


def test_the_pooler_names_a_pool_mode_and_listening_goes_around_a_transaction_pooler() -> None:
    with pytest.raises(ConfigurationError, match="pooler= must be one of transaction, session"):
        PostgresInbox("postgresql://app@127.0.0.1:6432/app?pooler=statement")
    with pytest.raises(ConfigurationError, match="listen_dsn must reach PostgreSQL directly"):
        PostgresRegistry(
            "postgresql://app@127.0.0.1:6432/app?pooler=transaction",
            listen_dsn="postgresql://app@127.0.0.1:6432/app?pooler=transaction",
        )
    polling = PostgresRegistry("postgresql://app@127.0.0.1:6432/app?pooler=transaction")
    assert polling.polls
    assert polling.mode == "through a transaction pooler, polling every 1 s"
    assert not PostgresRegistry("postgresql://app@127.0.0.1:6432/app?pooler=session").polls
